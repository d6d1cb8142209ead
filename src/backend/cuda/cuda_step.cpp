// The step program (see cuda_step.h): the launches of one padded step, in order. Compiled by nvcc's host compiler
// into la_backend_cuda, and as host C++ under the SIMT emulation into test_simt_forward.
#include "cuda_step.h"

#include <cmath>

#include "kv_cache.h"
#include "ops.h"
#include "step_attention.h"
#include "verify.h"

namespace la {
namespace {

// ptr + elements of dt.
void* elem(void* p, int64_t n, kern::DType dt) { return static_cast<char*>(p) + n * int64_t(kern::dtype_size(dt)); }

// The slots of a batched step on the device (null: a single-cache step on StepCaches).
struct DevSlots {
  const int32_t* seg = nullptr;
  void* const* ptrs = nullptr;  // [layers][2][count]
  int count = 0, max_cache_rows = 0;
};

StepStatus enqueue(const StepDims& d, const StepWeights& w, const StepBuffers& buf, const StepCaches& c,
                   const PaddedStepLayout& lay, const DevSlots* slots, StepLinear& lin, cudaStream_t s) {
  const kern::DType dt = d.dt;
  const int R = lay.rows, H = d.H, Q = d.Q(), KV = d.KV(), W = d.W(), I = d.I, V = d.V;
  if (R <= 0 || R > buf.rows || lay.lm_rows < 0 || lay.lm_rows > R || int(w.layers.size()) != d.layers ||
      (!slots && (int(c.k.size()) != d.layers || int(c.v.size()) != d.layers)))
    return {cudaErrorInvalidValue, "step arguments"};
  const int32_t* ids = buf.step + lay.ids;
  const int32_t* pos = buf.step + lay.positions;
  const int32_t* len = buf.step + lay.cache_len;
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(buf.step + lay.bits);
  StepStatus st;
  auto ok = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess) st = {e, what};
    return e == cudaSuccess;
  };
  auto linear = [&](int N, int K, const void* x, const void* wt, const void* bias, void* y) {
    return lin.linear(kern::LinearArgs{dt, R, N, K, x, K, wt, K, bias, y, N}, s);
  };

  if (!ok(kern::launch_embed_rows(dt, R, H, ids, V, w.embed, H, buf.x, H, s), "embed")) return st;
  if (!ok(kern::launch_rms_norm(dt, R, H, buf.x, H, nullptr, 0, nullptr, 0, w.layers[0].ln1, d.eps, buf.h, H, s),
          "rms_norm"))
    return st;
  for (int l = 0; l < d.layers; ++l) {
    const StepLayerWeights& lw = w.layers[l];
    if (!ok(linear(W, H, buf.h, lw.wqkv, lw.bqkv, buf.qkv), "qkv projection")) return st;
    void* q = buf.qkv;
    void* k = elem(buf.qkv, Q, dt);
    void* v = elem(buf.qkv, Q + KV, dt);
    if (!ok(kern::launch_rope(dt, R, d.D, pos, w.inv_freq, 1.f, q, d.Hq, W, d.D, k, d.Hkv, W, d.D, s), "rope"))
      return st;
    void* const* lptrs = slots ? slots->ptrs + 2 * l * slots->count : nullptr;  // layer l: K bases, V bases
    if (slots) {
      if (!ok(kern::launch_kv_append_slots(dt, R, d.Hkv, d.D, k, W, d.D, v, W, d.D, lptrs, KV, d.D, slots->seg,
                                           slots->count, s),
              "kv_append"))
        return st;
    } else if (!ok(kern::launch_kv_append(dt, R, d.Hkv, d.D, k, W, d.D, v, W, d.D, c.k[l], c.v[l], KV, d.D, len,
                                          c.rows, s),
                   "kv_append")) {
      return st;
    }
    kern::StepAttentionArgs a;
    a.dtype = dt;
    a.T = R;
    a.Hq = d.Hq;
    a.Hkv = d.Hkv;
    a.D = d.D;
    a.q = q;
    a.q_stride_t = W;
    a.q_stride_h = d.D;
    a.k_cache = slots ? nullptr : c.k[l];
    a.kc_stride_t = KV;
    a.kc_stride_h = d.D;
    a.v_cache = slots ? nullptr : c.v[l];
    a.vc_stride_t = KV;
    a.vc_stride_h = d.D;
    a.cache_len_dev = slots ? nullptr : len;
    a.max_cache_len = slots ? slots->max_cache_rows : c.rows;
    if (slots) {
      a.slot_seg = slots->seg;
      a.slot_caches = lptrs;
      a.slots = slots->count;
    }
    a.k_new = k;
    a.kn_stride_t = W;
    a.kn_stride_h = d.D;
    a.v_new = v;
    a.vn_stride_t = W;
    a.vn_stride_h = d.D;
    a.anc_bits = bits;
    a.out = buf.attn;
    a.o_stride_t = Q;
    a.o_stride_h = d.D;
    a.scale = float(1.0 / std::sqrt(double(d.D)));
    a.workspace = buf.workspace;
    a.workspace_bytes = buf.workspace_bytes;
    a.split_keys = d.split_keys;
    if (!ok(kern::launch_step_attention(a, s), "step_attention")) return st;
    if (!ok(linear(H, Q, buf.attn, lw.wo, lw.bo, buf.a), "output projection")) return st;
    // x <- x + attn_out; h <- rms_norm(x) * ln2
    if (!ok(kern::launch_rms_norm(dt, R, H, buf.a, H, buf.x, H, buf.x, H, lw.ln2, d.eps, buf.h, H, s), "add_rms_norm"))
      return st;
    if (!ok(linear(2 * I, H, buf.h, lw.wgu, nullptr, buf.gu), "gate/up projection")) return st;
    if (!ok(kern::launch_swiglu(dt, R, I, buf.gu, 2 * int64_t(I), elem(buf.gu, I, dt), 2 * int64_t(I), buf.act, I, s),
            "swiglu"))
      return st;
    if (!ok(linear(H, I, buf.act, lw.wd, nullptr, buf.a), "down projection")) return st;
    // x <- x + mlp_out; h <- rms_norm(x) * (next layer's ln1, or the final norm)
    const void* next = l + 1 < d.layers ? w.layers[l + 1].ln1 : w.norm;
    if (!ok(kern::launch_rms_norm(dt, R, H, buf.a, H, buf.x, H, buf.x, H, next, d.eps, buf.h, H, s), "add_rms_norm"))
      return st;
  }
  // The LM head over the output rows only (PaddedStepLayout: lm_rows, gather): gathered into buf.a (free now) by
  // the embedding gather's kernel with the step rows as its table, when not every row is an output.
  const int O = lay.lm_rows;
  if (O == 0) return st;  // a step of prompt chunks only: no row chooses a token
  const void* hx = buf.h;
  if (lay.gather) {
    if (!ok(kern::launch_embed_rows(dt, O, H, buf.step + lay.outputs, R, buf.h, H, buf.a, H, s), "output rows"))
      return st;
    hx = buf.a;
  }
  if (!ok(lin.linear(kern::LinearArgs{dt, O, V, H, hx, H, w.lm_head, H, nullptr, buf.logits, V}, s), "lm_head"))
    return st;
  ok(kern::launch_argmax_rows(dt, O, V, buf.logits, V, buf.argmax, s), "argmax");
  return st;
}

}  // namespace

StepStatus enqueue_step(const StepDims& d, const StepWeights& w, const StepBuffers& buf, const StepCaches& c,
                        const PaddedStepLayout& lay, StepLinear& lin, cudaStream_t s) {
  return enqueue(d, w, buf, c, lay, nullptr, lin, s);
}

StepStatus enqueue_batch_step(const StepDims& d, const StepWeights& w, const StepBuffers& buf,
                              const BatchStepLayout& lay, int max_cache_rows, StepLinear& lin, cudaStream_t s) {
  if (lay.slots <= 0 || max_cache_rows < 0) return {cudaErrorInvalidValue, "batch step arguments"};
  DevSlots slots;
  slots.seg = buf.step + lay.seg;
  slots.ptrs = reinterpret_cast<void* const*>(buf.step + lay.ptrs);
  slots.count = lay.slots;
  slots.max_cache_rows = max_cache_rows;
  return enqueue(d, w, buf, StepCaches{}, lay.step, &slots, lin, s);
}

}  // namespace la
