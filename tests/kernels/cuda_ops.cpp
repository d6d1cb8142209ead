// at::Tensor adapters of the CUDA kernels for the kernel tests and bench_kernels (see cuda_ops.h). Compiles to nothing in CPU-only
// builds.
#ifdef LOOKAHEAD_WITH_CUDA
#include "cuda_ops.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "lookahead/util/error.h"
#include "kv_cache.h"
#include "lookahead/backend/cuda/step_layout.h"
#include "ops.h"
#include "step_attention.h"
#include "verify.h"

namespace la::cuda {
namespace {

using kern::DType;

DType dtype_of(const at::Tensor& t, const char* what) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::F32;
    case at::kHalf: return DType::F16;
    case at::kBFloat16: return DType::BF16;
    default: fail("la::cuda::", what, ": unsupported dtype ", t.scalar_type(), " (need float32, float16 or bfloat16)");
  }
}

cudaStream_t stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.get_device()).stream(); }

void check(cudaError_t e, const char* what) {
  LA_CHECK(e == cudaSuccess, "la::cuda::", what, ": CUDA error: ", cudaGetErrorString(e));
}

void check_on(const at::Tensor& t, const at::Tensor& ref, const char* what, const char* name) {
  LA_CHECK(t.defined(), "la::cuda::", what, ": ", name, " is undefined");
  LA_CHECK(t.is_cuda() && t.device() == ref.device(), "la::cuda::", what, ": ", name, " must be on ", ref.device(),
           " (it is on ", t.device(), ")");
}

void check_same_dtype(const at::Tensor& t, const at::Tensor& ref, const char* what, const char* name) {
  LA_CHECK(t.scalar_type() == ref.scalar_type(), "la::cuda::", what, ": ", name, " has dtype ", t.scalar_type(),
           ", expected ", ref.scalar_type());
}

// int32, contiguous (converted if needed).
at::Tensor as_i32(const at::Tensor& t) {
  return t.scalar_type() == at::kInt && t.is_contiguous() ? t : t.to(at::kInt).contiguous();
}

// [rows, D]-style rows with 16-byte aligned starts (the attention kernel copies 16-byte chunks).
bool rows_aligned(const at::Tensor& t) {
  const int64_t es = int64_t(t.element_size());
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d)
    if ((t.stride(d) * es) % 16) return false;
  return t.stride(-1) == 1;
}
at::Tensor aligned_or_copy(const at::Tensor& t) {
  return rows_aligned(t) ? t : t.clone(at::MemoryFormat::Contiguous);
}

void check_heads(const at::Tensor& t, int64_t T, int64_t H, int64_t D, const char* what, const char* name) {
  LA_CHECK(t.dim() == 3 && (T < 0 || t.size(0) == T) && t.size(1) == H && t.size(2) == D, "la::cuda::", what, ": ",
           name, " must be [", T < 0 ? std::string("L") : std::to_string(T), ", ", H, ", ", D, "], got ", t.sizes());
}

// A [..., H] tensor as [rows, H] (a view when possible; a contiguous copy otherwise).
at::Tensor as_rows(const at::Tensor& t, int64_t H) {
  at::Tensor r = t.dim() == 1 ? t.view({1, H}) : t.reshape({-1, H});
  return r.stride(1) == 1 ? r : r.contiguous();
}

}  // namespace

at::Tensor ancestor_bits(const at::Tensor& parents) {
  LA_CHECK(parents.defined() && parents.is_cuda() && parents.dim() == 1, "la::cuda::ancestor_bits: parents must be a "
           "1-D CUDA tensor");
  // The host packing the CUDA forward uploads (a test adapter: one device-to-host and one host-to-device copy).
  const at::Tensor p = parents.to(at::kCPU).to(at::kInt).contiguous();
  const int T = int(p.size(0));
  const std::vector<int32_t> pv(p.data_ptr<int32_t>(), p.data_ptr<int32_t>() + T);
  const std::vector<uint32_t> bits = la::pack_ancestor_bits(pv, T);
  at::Tensor h = at::empty({T, kern::ancestor_words(T)}, at::TensorOptions().dtype(at::kInt));
  std::memcpy(h.data_ptr<int32_t>(), bits.data(), bits.size() * sizeof(uint32_t));
  return h.to(parents.device());
}

at::Tensor step_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                          int64_t cache_len, const at::Tensor& k_new, const at::Tensor& v_new,
                          const at::Tensor& parents, double scale) {
  LA_CHECK(parents.defined() && parents.dim() == 1 && q.defined() && q.dim() == 3 && parents.size(0) == q.size(0),
           "la::cuda::step_attention: parents must be [T] with T = q.size(0)");
  return step_attention_bits(q, k_cache, v_cache, cache_len, k_new, v_new, ancestor_bits(parents), scale);
}

at::Tensor step_attention_bits(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                               int64_t cache_len, const at::Tensor& k_new, const at::Tensor& v_new,
                               const at::Tensor& anc_bits, double scale, const AttentionOptions& opt) {
  const char* what = "step_attention";
  LA_CHECK(q.defined() && q.is_cuda() && q.dim() == 3, "la::cuda::step_attention: q must be a [T, Hq, D] CUDA tensor");
  c10::cuda::CUDAGuard guard(q.device());
  const DType dt = dtype_of(q, what);
  const int64_t T = q.size(0), Hq = q.size(1), D = q.size(2);
  LA_CHECK(T > 0 && Hq > 0, "la::cuda::step_attention: empty q ", q.sizes());
  LA_CHECK(D <= 128 && D % (16 / q.element_size()) == 0, "la::cuda::step_attention: head dim ", D,
           " unsupported (need a multiple of ", 16 / q.element_size(), ", at most 128)");
  check_on(k_new, q, what, "k_new");
  check_on(v_new, q, what, "v_new");
  check_same_dtype(k_new, q, what, "k_new");
  check_same_dtype(v_new, q, what, "v_new");
  LA_CHECK(k_new.dim() == 3, "la::cuda::step_attention: k_new must be [T, Hkv, D], got ", k_new.sizes());
  const int64_t Hkv = k_new.size(1);
  LA_CHECK(Hkv > 0 && Hq % Hkv == 0, "la::cuda::step_attention: Hq=", Hq, " is not a multiple of Hkv=", Hkv);
  check_heads(k_new, T, Hkv, D, what, "k_new");
  check_heads(v_new, T, Hkv, D, what, "v_new");
  const bool dev_len = opt.cache_len_dev != nullptr;
  const int64_t max_len = dev_len ? opt.max_cache_len : cache_len;
  LA_CHECK(max_len >= 0 && max_len <= std::numeric_limits<int>::max() / 2, "la::cuda::step_attention: bad cache length ",
           max_len);
  if (max_len > 0) {
    check_on(k_cache, q, what, "k_cache");
    check_on(v_cache, q, what, "v_cache");
    check_same_dtype(k_cache, q, what, "k_cache");
    check_same_dtype(v_cache, q, what, "v_cache");
    check_heads(k_cache, -1, Hkv, D, what, "k_cache");
    check_heads(v_cache, -1, Hkv, D, what, "v_cache");
    LA_CHECK(k_cache.size(0) >= max_len && v_cache.size(0) >= max_len, "la::cuda::step_attention: cache holds ",
             k_cache.size(0), " rows, need ", max_len);
    LA_CHECK(rows_aligned(k_cache) && rows_aligned(v_cache),
             "la::cuda::step_attention: k/v_cache rows must have unit inner stride and 16-byte aligned starts");
  }
  if (dev_len) {
    check_on(*opt.cache_len_dev, q, what, "cache_len_dev");
    LA_CHECK(opt.cache_len_dev->scalar_type() == at::kInt && opt.cache_len_dev->numel() >= 1,
             "la::cuda::step_attention: cache_len_dev must be an int32 device tensor");
  }
  check_on(anc_bits, q, what, "anc_bits");
  LA_CHECK(anc_bits.scalar_type() == at::kInt && anc_bits.dim() == 2 && anc_bits.size(0) == T &&
               anc_bits.size(1) == kern::ancestor_words(int(T)) && anc_bits.is_contiguous(),
           "la::cuda::step_attention: anc_bits must be contiguous int32 [T, ceil(T/32)] (ancestor_bits())");

  const at::Tensor qa = aligned_or_copy(q), kna = aligned_or_copy(k_new), vna = aligned_or_copy(v_new);
  at::Tensor out;
  if (opt.out) {
    out = *opt.out;
    check_on(out, q, what, "out");
    check_same_dtype(out, q, what, "out");
    check_heads(out, T, Hq, D, what, "out");
    LA_CHECK(out.stride(2) == 1, "la::cuda::step_attention: out needs unit inner stride");
  } else {
    out = at::empty({T, Hq, D}, q.options());
  }

  kern::StepAttentionArgs a;
  a.dtype = dt;
  a.T = int(T);
  a.Hq = int(Hq);
  a.Hkv = int(Hkv);
  a.D = int(D);
  a.q = qa.data_ptr();
  a.q_stride_t = qa.stride(0);
  a.q_stride_h = qa.stride(1);
  if (max_len > 0) {
    a.k_cache = k_cache.data_ptr();
    a.kc_stride_t = k_cache.stride(0);
    a.kc_stride_h = k_cache.stride(1);
    a.v_cache = v_cache.data_ptr();
    a.vc_stride_t = v_cache.stride(0);
    a.vc_stride_h = v_cache.stride(1);
  }
  a.cache_len = dev_len ? 0 : int(cache_len);
  a.cache_len_dev = dev_len ? opt.cache_len_dev->data_ptr<int32_t>() : nullptr;
  a.max_cache_len = int(max_len);
  a.k_new = kna.data_ptr();
  a.kn_stride_t = kna.stride(0);
  a.kn_stride_h = kna.stride(1);
  a.v_new = vna.data_ptr();
  a.vn_stride_t = vna.stride(0);
  a.vn_stride_h = vna.stride(1);
  a.anc_bits = reinterpret_cast<const uint32_t*>(anc_bits.data_ptr<int32_t>());
  a.out = out.data_ptr();
  a.o_stride_t = out.stride(0);
  a.o_stride_h = out.stride(1);
  a.scale = float(scale);
  a.split_keys = opt.split_keys;
  at::Tensor ws;
  if (opt.workspace) {
    check_on(*opt.workspace, q, what, "workspace");
    LA_CHECK(opt.workspace->is_contiguous(), "la::cuda::step_attention: workspace must be contiguous");
    a.workspace = opt.workspace->data_ptr();
    a.workspace_bytes = opt.workspace->nbytes();
  } else {
    ws = step_attention_workspace(q, max_len, opt.split_keys);
    a.workspace_bytes = ws.nbytes();
    if (a.workspace_bytes > 0) a.workspace = ws.data_ptr();
  }
  check(kern::launch_step_attention(a, stream_of(q)), what);
  return out;
}

int step_attention_splits(int64_t T, int64_t cache_len, int split_keys) {
  kern::StepAttentionArgs a;
  a.T = int(T);
  a.cache_len = int(cache_len);
  a.split_keys = split_keys;
  return kern::step_attention_splits(a);
}

at::Tensor step_attention_workspace(const at::Tensor& q, int64_t cache_len, int split_keys) {
  LA_CHECK(q.defined() && q.dim() == 3, "la::cuda::step_attention_workspace: q must be [T, Hq, D]");
  const int splits = step_attention_splits(q.size(0), cache_len, split_keys);
  const size_t bytes = kern::step_attention_workspace_bytes(int(q.size(0)), int(q.size(1)), int(q.size(2)), splits);
  return at::empty({int64_t(bytes)}, q.options().dtype(at::kByte));
}

namespace {

at::Tensor rms_norm_impl(const at::Tensor& x, const at::Tensor* residual, const at::Tensor& weight, double eps) {
  const char* what = "rms_norm";
  LA_CHECK(x.defined() && x.is_cuda() && x.dim() >= 1, "la::cuda::rms_norm: x must be a CUDA tensor");
  c10::cuda::CUDAGuard guard(x.device());
  const DType dt = dtype_of(x, what);
  const int64_t H = x.size(-1);
  check_on(weight, x, what, "weight");
  check_same_dtype(weight, x, what, "weight");
  LA_CHECK(weight.dim() == 1 && weight.size(0) == H, "la::cuda::rms_norm: weight must be [", H, "]");
  const at::Tensor w = weight.contiguous();
  const at::Tensor x2 = as_rows(x, H);
  at::Tensor r2;
  if (residual) {
    check_on(*residual, x, what, "residual");
    check_same_dtype(*residual, x, what, "residual");
    LA_CHECK(residual->sizes() == x.sizes(), "la::cuda::add_rms_norm_: residual ", residual->sizes(), " != x ",
             x.sizes());
    r2 = residual->dim() == 1 ? residual->view({1, H}) : residual->view({-1, H});  // in place: must be a view
    LA_CHECK(r2.stride(1) == 1, "la::cuda::add_rms_norm_: residual needs unit inner stride");
  }
  at::Tensor out = at::empty(x.sizes(), x.options());
  const at::Tensor o2 = out.view({-1, H});
  check(kern::launch_rms_norm(dt, int(x2.size(0)), int(H), x2.data_ptr(), x2.stride(0),
                              residual ? r2.data_ptr() : nullptr, residual ? r2.stride(0) : 0,
                              residual ? r2.data_ptr() : nullptr, residual ? r2.stride(0) : 0, w.data_ptr(),
                              float(eps), o2.data_ptr(), o2.stride(0), stream_of(x)),
        what);
  return out;
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return rms_norm_impl(x, nullptr, weight, eps);
}

at::Tensor add_rms_norm_(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight, double eps) {
  return rms_norm_impl(x, &residual, weight, eps);
}

void rope_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& positions, const at::Tensor& inv_freq,
           double attn_scale) {
  const char* what = "rope_";
  LA_CHECK(q.defined() && q.is_cuda() && q.dim() == 3 && q.stride(2) == 1,
           "la::cuda::rope_: q must be a [T, H, D] CUDA tensor with unit inner stride");
  c10::cuda::CUDAGuard guard(q.device());
  const DType dt = dtype_of(q, what);
  const int64_t T = q.size(0), D = q.size(2);
  LA_CHECK(D % 2 == 0, "la::cuda::rope_: odd head dim ", D);
  if (k.defined()) {
    check_on(k, q, what, "k");
    check_same_dtype(k, q, what, "k");
    LA_CHECK(k.dim() == 3 && k.size(0) == T && k.size(2) == D && k.stride(2) == 1,
             "la::cuda::rope_: k must be [T, Hk, D] with unit inner stride, got ", k.sizes());
  }
  check_on(positions, q, what, "positions");
  check_on(inv_freq, q, what, "inv_freq");
  LA_CHECK(positions.dim() == 1 && positions.size(0) == T, "la::cuda::rope_: positions must be [T]");
  LA_CHECK(inv_freq.scalar_type() == at::kFloat && inv_freq.numel() == D / 2,
           "la::cuda::rope_: inv_freq must be float32 [D/2]");
  const at::Tensor pos = as_i32(positions);
  const at::Tensor f = inv_freq.contiguous();
  check(kern::launch_rope(dt, int(T), int(D), pos.data_ptr<int32_t>(), f.data_ptr<float>(), float(attn_scale),
                          q.data_ptr(), int(q.size(1)), q.stride(0), q.stride(1), k.defined() ? k.data_ptr() : nullptr,
                          k.defined() ? int(k.size(1)) : 0, k.defined() ? k.stride(0) : 0,
                          k.defined() ? k.stride(1) : 0, stream_of(q)),
        what);
}

void rope_(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& inv_freq, double attn_scale) {
  rope_(x, at::Tensor(), positions, inv_freq, attn_scale);
}

namespace {
at::Tensor swiglu_impl(const at::Tensor& gate_rows, const void* gate, int64_t gs, const void* up, int64_t us,
                       at::IntArrayRef out_sizes, int64_t I) {
  at::Tensor out = at::empty(out_sizes, gate_rows.options());
  const int64_t rows = gate_rows.size(0);
  check(kern::launch_swiglu(dtype_of(gate_rows, "swiglu"), int(rows), int(I), gate, gs, up, us, out.data_ptr(), I,
                            stream_of(gate_rows)),
        "swiglu");
  return out;
}
}  // namespace

at::Tensor swiglu(const at::Tensor& x) {
  LA_CHECK(x.defined() && x.is_cuda() && x.dim() >= 1 && x.size(-1) % 2 == 0,
           "la::cuda::swiglu: x must be a CUDA tensor [..., 2I]");
  c10::cuda::CUDAGuard guard(x.device());
  const int64_t I = x.size(-1) / 2;
  const at::Tensor x2 = as_rows(x, 2 * I);
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() = I;
  const char* base = static_cast<const char*>(x2.data_ptr());
  return swiglu_impl(x2, base, x2.stride(0), base + I * x2.element_size(), x2.stride(0), sizes, I);
}

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  LA_CHECK(gate.defined() && gate.is_cuda() && gate.dim() >= 1, "la::cuda::swiglu: gate must be a CUDA tensor");
  c10::cuda::CUDAGuard guard(gate.device());
  check_on(up, gate, "swiglu", "up");
  check_same_dtype(up, gate, "swiglu", "up");
  LA_CHECK(up.sizes() == gate.sizes(), "la::cuda::swiglu: gate ", gate.sizes(), " != up ", up.sizes());
  const int64_t I = gate.size(-1);
  const at::Tensor g2 = as_rows(gate, I), u2 = as_rows(up, I);
  return swiglu_impl(g2, g2.data_ptr(), g2.stride(0), u2.data_ptr(), u2.stride(0), gate.sizes(), I);
}

at::Tensor argmax_rows(const at::Tensor& logits) {
  LA_CHECK(logits.defined() && logits.is_cuda() && (logits.dim() == 1 || logits.dim() == 2),
           "la::cuda::argmax_rows: logits must be a [rows, V] CUDA tensor");
  c10::cuda::CUDAGuard guard(logits.device());
  const int64_t V = logits.size(-1);
  const at::Tensor l2 = as_rows(logits, V);
  at::Tensor out = at::empty({l2.size(0)}, logits.options().dtype(at::kInt));
  check(kern::launch_argmax_rows(dtype_of(logits, "argmax_rows"), int(l2.size(0)), int(V), l2.data_ptr(), l2.stride(0),
                                 out.data_ptr<int32_t>(), stream_of(logits)),
        "argmax_rows");
  return out;
}

}  // namespace la::cuda
#endif  // LOOKAHEAD_WITH_CUDA
