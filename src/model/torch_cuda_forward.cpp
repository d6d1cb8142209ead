// The CUDA step forward: the lookahead kernels (fused add+RMSNorm, RoPE on the fused qkv, KV append at a
// device-side length, step attention under packed ancestor bits, SwiGLU, row argmax) around cuBLAS GEMMs, on
// static buffers, with one CUDA graph per step bucket (see cuda_forward.h and step_layout.h).
//
// Per step the host does: pad the step to its bucket and pack the ancestor bits into one pinned buffer (with ids,
// positions, parents and the cache length), one non-blocking host-to-device copy, one graph replay (or the eager
// launches), one device-to-host copy of the T argmax ids, one stream synchronisation. Nothing is allocated.
//
// Graphs: a bucket's first step runs eagerly (warm-up: cuBLAS handles and workspaces, kernel attributes), its
// second is captured with at::cuda::CUDAGraph on a side stream made c10's current stream (so ATen and the kernel
// adapters launch on the capturing stream) and replayed on the caller's stream from then on. Every bucket shares
// one graph memory pool. Everything a graph reads lives at fixed addresses, and everything that varies between
// replays (ids, positions, parents, ancestor bits, cache length) is read from the device step buffer: the KV
// append and the attention take the cache length from there, so one graph serves every cache length (the
// attention's splits are laid out for the cache capacity: empty splits past the length cost a launch slot, no bits).
//
// Batch invariance: the attention's split boundaries sit at fixed key positions (split_keys_, fixed per model), so
// a token's attention output does not depend on the bucket or the cache length (fp32; kernels/step_attention.cuh).
// The GEMMs are cuBLAS's, whose algorithm depends on M (the bucket): not batch-invariant (docs/gpu.md).
#ifdef LOOKAHEAD_WITH_CUDA
#include "cuda_forward.h"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>

#include "cuda_support.h"
#include "lookahead/util/error.h"
#include "kv_cache.h"
#include "ops.h"
#include "step_attention.h"
#include "verify.h"

namespace la {
namespace {

kern::DType kdtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return kern::DType::F32;
    case at::kHalf: return kern::DType::F16;
    case at::kBFloat16: return kern::DType::BF16;
    default: fail("CUDA forward: unsupported dtype ", t);
  }
}

void ck(cudaError_t e, const char* what) {
  LA_CHECK(e == cudaSuccess, "CUDA forward: ", what, ": ", cudaGetErrorString(e));
}

cudaStream_t cur_stream(const at::Device& d) { return c10::cuda::getCurrentCUDAStream(d.index()).stream(); }

// ptr + elements, typed by the buffer's element size.
void* at_elem(const at::Tensor& t, int64_t elems) { return static_cast<char*>(t.data_ptr()) + elems * t.element_size(); }

}  // namespace

std::string CudaForward::unsupported_reason(const ModelConfig& c, at::ScalarType dt) {
  const std::string why = cuda_kernels_unsupported_reason(c, dt == at::kFloat ? 4 : 2);
  if (!why.empty()) return why;  // including the architecture features the kernels lack (cuda_support.h)
  return "";
}

CudaForward::CudaForward(const CudaModelRefs& refs, bool graphs)
    : m_(refs), graphs_(graphs), dev_(refs.embed.device()) {
  const ModelConfig& c = *m_.cfg;
  LA_CHECK(dev_.is_cuda(), "CUDA forward on a ", dev_, " model");
  const std::string why = unsupported_reason(c, m_.dtype);
  LA_CHECK(why.empty(), "--kernels on: ", why);
  H_ = c.hidden;
  Hq_ = c.heads;
  Hkv_ = c.kv_heads;
  D_ = c.head_dim;
  Q_ = Hq_ * D_;
  KV_ = Hkv_ * D_;
  W_ = Q_ + 2 * KV_;
  I_ = c.intermediate;
  V_ = c.vocab;
  layers_ = c.layers;
  c10::InferenceMode ng;
  c10::cuda::CUDAGuard guard(dev_);
  const auto o = at::TensorOptions().dtype(m_.dtype).device(dev_);
  const auto oi = at::TensorOptions().dtype(at::kInt).device(dev_);
  const int R = kMaxRows;
  x_ = at::zeros({R, H_}, o);
  h_ = at::zeros({R, H_}, o);
  a_ = at::zeros({R, H_}, o);
  qkv_ = at::zeros({R, W_}, o);
  attn_ = at::zeros({R, Hq_, D_}, o);
  gu_ = at::zeros({R, 2 * int64_t(I_)}, o);
  act_ = at::zeros({R, int64_t(I_)}, o);
  logits_ = at::zeros({R, int64_t(V_)}, o);
  am_ = at::zeros({R}, oi);
  const PaddedStepLayout big = padded_step_layout(R);
  dstep_ = at::zeros({big.words}, oi);
  dcommit_ = at::zeros({R}, oi);
  // Attention partials: splits of split_keys_ key positions, a constant of the model (batch invariance), at most 16
  // of them up to the largest cache (max_positions + 256 rows) plus a step, for the largest step.
  split_keys_ = kern::attn_split_keys(int64_t(c.max_positions) + 256 + R);
  ws_ = at::zeros({int64_t(kern::step_attention_workspace_bytes(R, Hq_, D_, 16)) + 256}, o.dtype(at::kByte));
  const auto pinned = at::TensorOptions().dtype(at::kInt).pinned_memory(true);
  hstep_ = at::zeros({big.words}, pinned);
  hout_ = at::zeros({R}, pinned);
  hcommit_ = at::zeros({R}, pinned);
  rebuild_cache_table();
  // One capture stream for the model's life, made (and its lazy driver state touched) now rather than at the first
  // capture: every bucket's graph is captured on the same stream.
  capture_stream_.emplace(c10::cuda::getStreamFromPool(false, dev_.index()));
  ck(cudaStreamSynchronize(capture_stream_->stream()), "capture stream");
}

void CudaForward::rebuild_cache_table() {
  std::vector<int64_t> p;
  for (int l = 0; l < layers_; ++l) {
    p.push_back(reinterpret_cast<int64_t>((*m_.kc)[l].data_ptr()));
    p.push_back(reinterpret_cast<int64_t>((*m_.vc)[l].data_ptr()));
  }
  table_ = at::tensor(p, at::TensorOptions().dtype(at::kLong)).to(dev_);
}

void CudaForward::cache_changed() {
  c10::cuda::CUDAGuard guard(dev_);
  ck(cudaStreamSynchronize(cur_stream(dev_)), "synchronise before dropping graphs");
  graphs_by_rows_.clear();
  seen_.clear();
  have_pool_ = false;  // the pool went with its graphs
  rebuild_cache_table();
}

void CudaForward::enqueue(int R, const PaddedStepLayout& lay) {
  const kern::DType dt = kdtype(m_.dtype);
  const cudaStream_t s = cur_stream(dev_);
  const float eps = float(m_.cfg->rms_eps);
  const int cache_rows = int((*m_.kc)[0].size(0));
  int32_t* step = dstep_.data_ptr<int32_t>();
  const int32_t* pos = step + lay.positions;
  const int32_t* len = step + lay.cache_len;
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(step + lay.bits);
  const at::Tensor ids = dstep_.narrow(0, lay.ids, R);
  at::Tensor X = x_.narrow(0, 0, R), Hn = h_.narrow(0, 0, R), A = a_.narrow(0, 0, R), QKV = qkv_.narrow(0, 0, R);
  at::Tensor ATT = attn_.narrow(0, 0, R).view({R, Q_}), GU = gu_.narrow(0, 0, R), ACT = act_.narrow(0, 0, R);
  at::Tensor LOG = logits_.narrow(0, 0, R);
  const auto& L = *m_.layers;

  at::index_select_out(X, m_.embed, 0, ids);
  ck(kern::launch_rms_norm(dt, R, H_, X.data_ptr(), H_, nullptr, 0, nullptr, 0, L[0].ln1.data_ptr(), eps,
                           Hn.data_ptr(), H_, s),
     "rms_norm");
  for (int l = 0; l < layers_; ++l) {
    const LayerW& w = L[l];
    if (w.bqkv.defined()) at::addmm_out(QKV, w.bqkv, Hn, w.wqkv.t());
    else at::mm_out(QKV, Hn, w.wqkv.t());
    void* q = QKV.data_ptr();
    void* k = at_elem(QKV, Q_);
    void* v = at_elem(QKV, Q_ + KV_);
    ck(kern::launch_rope(dt, R, D_, pos, m_.inv_freq.data_ptr<float>(), 1.f, q, Hq_, W_, D_, k, Hkv_, W_, D_, s),
       "rope");
    const at::Tensor& kc = (*m_.kc)[l];
    const at::Tensor& vc = (*m_.vc)[l];
    ck(kern::launch_kv_append(dt, R, Hkv_, D_, k, W_, D_, v, W_, D_, kc.data_ptr(), vc.data_ptr(), KV_, D_, len,
                              cache_rows, s),
       "kv_append");
    kern::StepAttentionArgs a;
    a.dtype = dt;
    a.T = R;
    a.Hq = Hq_;
    a.Hkv = Hkv_;
    a.D = D_;
    a.q = q;
    a.q_stride_t = W_;
    a.q_stride_h = D_;
    a.k_cache = kc.data_ptr();
    a.kc_stride_t = KV_;
    a.kc_stride_h = D_;
    a.v_cache = vc.data_ptr();
    a.vc_stride_t = KV_;
    a.vc_stride_h = D_;
    a.cache_len_dev = len;
    a.max_cache_len = cache_rows;
    a.k_new = k;
    a.kn_stride_t = W_;
    a.kn_stride_h = D_;
    a.v_new = v;
    a.vn_stride_t = W_;
    a.vn_stride_h = D_;
    a.anc_bits = bits;
    a.out = ATT.data_ptr();
    a.o_stride_t = Q_;
    a.o_stride_h = D_;
    a.scale = float(1.0 / std::sqrt(double(D_)));
    a.workspace = ws_.data_ptr();
    a.workspace_bytes = size_t(ws_.numel());
    a.split_keys = split_keys_;
    ck(kern::launch_step_attention(a, s), "step_attention");
    if (w.bo.defined()) at::addmm_out(A, w.bo, ATT, w.wo.t());
    else at::mm_out(A, ATT, w.wo.t());
    // x <- x + attn_out; h <- rms_norm(x) * ln2
    ck(kern::launch_rms_norm(dt, R, H_, A.data_ptr(), H_, X.data_ptr(), H_, X.data_ptr(), H_, w.ln2.data_ptr(), eps,
                             Hn.data_ptr(), H_, s),
       "add_rms_norm");
    at::mm_out(GU, Hn, w.wgu.t());
    ck(kern::launch_swiglu(dt, R, I_, GU.data_ptr(), 2 * int64_t(I_), at_elem(GU, I_), 2 * int64_t(I_), ACT.data_ptr(),
                           I_, s),
       "swiglu");
    at::mm_out(A, ACT, w.wd.t());
    // x <- x + mlp_out; h <- rms_norm(x) * (next layer's ln1, or the final norm)
    const at::Tensor& next = l + 1 < layers_ ? L[l + 1].ln1 : m_.norm;
    ck(kern::launch_rms_norm(dt, R, H_, A.data_ptr(), H_, X.data_ptr(), H_, X.data_ptr(), H_, next.data_ptr(), eps,
                             Hn.data_ptr(), H_, s),
       "add_rms_norm");
  }
  at::mm_out(LOG, Hn, m_.lm_head.t());
  ck(kern::launch_argmax_rows(dt, R, V_, LOG.data_ptr(), V_, am_.data_ptr<int32_t>(), s), "argmax");
}

void CudaForward::run(const StepInput& in, int L, int cache_rows) {
  const int T = static_cast<int>(in.tokens.size());
  const int R = step_bucket(T);
  LA_CHECK(R > 0 && R <= kMaxRows, "CUDA forward: step of ", T, " tokens exceeds ", kMaxRows);
  LA_CHECK(L + R <= cache_rows, "CUDA forward: cache of ", cache_rows, " rows cannot take ", R, " rows at ", L);
  c10::InferenceMode ng;
  c10::cuda::CUDAGuard guard(dev_);
  const PaddedStepLayout lay = padded_step_layout(R);
  // The previous step ended with a synchronisation, so its copy out of hstep_ has completed.
  fill_padded_step(in.tokens, in.positions, in.parents, L, lay, hstep_.data_ptr<int32_t>());
  const cudaStream_t s = cur_stream(dev_);
  ck(cudaMemcpyAsync(dstep_.data_ptr<int32_t>(), hstep_.data_ptr<int32_t>(), size_t(lay.words) * 4,
                     cudaMemcpyHostToDevice, s),
     "step upload");
  ++counters_.steps;
  if (!graphs_) {
    enqueue(R, lay);
    ++counters_.eager;
    return;
  }
  auto it = graphs_by_rows_.find(R);
  if (it == graphs_by_rows_.end()) {
    if (seen_[R]++ == 0) {  // warm-up
      enqueue(R, lay);
      ++counters_.eager;
      return;
    }
    auto g = std::make_unique<at::cuda::CUDAGraph>();
    ck(cudaStreamSynchronize(s), "synchronise before capture");
    {
      c10::cuda::CUDAStreamGuard sg(*capture_stream_);  // c10's current stream is the capturing one in here
      g->capture_begin(have_pool_ ? pool_ : c10::MempoolId_t{0, 0});
      try {
        enqueue(R, lay);
      } catch (...) {
        try {
          g->capture_end();
        } catch (...) {
        }
        (void)cudaGetLastError();
        throw;
      }
      g->capture_end();
    }
    if (!have_pool_) {
      pool_ = g->pool();
      have_pool_ = true;
    }
    ++counters_.captures;
    it = graphs_by_rows_.emplace(R, std::move(g)).first;
  }
  it->second->replay();  // on the caller's current stream, after the step upload
  ++counters_.replays;
}

std::vector<int32_t> CudaForward::argmax_to_host(int T) {
  c10::cuda::CUDAGuard guard(dev_);
  const cudaStream_t s = cur_stream(dev_);
  ck(cudaMemcpyAsync(hout_.data_ptr<int32_t>(), am_.data_ptr<int32_t>(), size_t(T) * 4, cudaMemcpyDeviceToHost, s),
     "argmax download");
  ck(cudaStreamSynchronize(s), "step");
  const int32_t* p = hout_.data_ptr<int32_t>();
  return std::vector<int32_t>(p, p + T);
}

void CudaForward::commit(const std::vector<int32_t>& idx, int L) {
  const int m = static_cast<int>(idx.size());
  LA_CHECK(m <= kMaxRows, "CUDA forward: commit of ", m, " rows");
  c10::cuda::CUDAGuard guard(dev_);
  const cudaStream_t s = cur_stream(dev_);
  // hcommit_ was last read by the previous commit's copy, which a forward's synchronisation has since waited for.
  std::memcpy(hcommit_.data_ptr<int32_t>(), idx.data(), size_t(m) * 4);
  ck(cudaMemcpyAsync(dcommit_.data_ptr<int32_t>(), hcommit_.data_ptr<int32_t>(), size_t(m) * 4,
                     cudaMemcpyHostToDevice, s),
     "commit upload");
  ck(kern::launch_kv_commit(kdtype(m_.dtype), 2 * layers_, reinterpret_cast<void* const*>(table_.data_ptr<int64_t>()),
                            KV_, L, dcommit_.data_ptr<int32_t>(), m, s),
     "kv_commit");
}

}  // namespace la
#endif  // LOOKAHEAD_WITH_CUDA
