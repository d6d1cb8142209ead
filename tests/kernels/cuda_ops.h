// at::Tensor adapters of the CUDA kernels (kernels/*.h), for the kernel tests and the kernel benchmark
// (la_cuda_ops: test_kernels, launch/bench/cpp/bench_kernels.cpp; the CUDA forward calls the raw launchers). No ATen here: at::Tensor is forward-declared.
//
// All tensors of a call live on one CUDA device; the kernels run on that device's current c10 stream, so
// they are captured by a CUDA graph begun on it. Float tensors of one call share one dtype (f32, f16 or bf16);
// index tensors are int32 (int64 inputs are converted, which allocates: pass int32 on hot paths). The last dim
// of every tensor must have unit stride; other strides are free unless stated. Errors throw la::Error.
#pragma once
#include <cstdint>
#include <vector>

namespace at {
class Tensor;
}

namespace la::cuda {

// parents [T] (parents[i] < i or -1) -> ancestor bits [T, ceil(T/32)] int32 (uint32 bit patterns): bit j of
// row i is set iff j is i or an ancestor of i. Compute once per step, reuse in every layer.
at::Tensor ancestor_bits(const at::Tensor& parents);

struct AttentionOptions {
  // int32 [1] on the device holding the cache length; overrides `cache_len` (a captured graph then replays at
  // any length). max_cache_len must then bound it (it chooses the split count and is what k/v_cache must hold).
  const at::Tensor* cache_len_dev = nullptr;
  int64_t max_cache_len = 0;
  // Reused fp32 partials buffer (any dtype, contiguous); too small for the splits is an error (the split count is
  // never reduced: batch invariance). If null, one is allocated per call from the caching allocator.
  const at::Tensor* workspace = nullptr;
  int split_keys = 0;               // key positions per split (multiple of 64); 0: kern::kAttnSplitKeys
  const at::Tensor* out = nullptr;  // preallocated output [T, Hq, D] (else a new contiguous tensor)
};

// Tree/step attention. q [T, Hq, D]; k_cache, v_cache [>= cache_len, Hkv, D] (rows beyond cache_len unused; may
// be undefined tensors when cache_len == 0); k_new, v_new [T, Hkv, D]; parents [T]. Returns [T, Hq, D].
at::Tensor step_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                          int64_t cache_len, const at::Tensor& k_new, const at::Tensor& v_new,
                          const at::Tensor& parents, double scale);
// Same with precomputed ancestor_bits(parents) and options.
at::Tensor step_attention_bits(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                               int64_t cache_len, const at::Tensor& k_new, const at::Tensor& v_new,
                               const at::Tensor& anc_bits, double scale, const AttentionOptions& opt = {});

// The flash-decoding split count step_attention_bits uses for T step tokens over cache_len keys (split_keys 0: the
// kernel's default), and a workspace for them on q's device: for callers that preallocate AttentionOptions::workspace.
int step_attention_splits(int64_t T, int64_t cache_len, int split_keys = 0);
at::Tensor step_attention_workspace(const at::Tensor& q, int64_t cache_len, int split_keys = 0);

// RMSNorm over the last dim (HF Llama rounding). x [..., H], weight [H]. Returns a new contiguous tensor.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
// Fused residual add: residual <- residual + x (in place, rounded to the dtype); returns rms_norm(residual).
at::Tensor add_rms_norm_(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight, double eps);

// RoPE in place, rotate-half layout. q [T, Hq, D], k [T, Hk, D] (strided views of a fused qkv are fine);
// positions [T]; inv_freq [D/2] float32 (Llama-3 scaling applied by the caller); cos/sin scaled by attn_scale.
void rope_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& positions, const at::Tensor& inv_freq,
           double attn_scale = 1.0);
void rope_(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& inv_freq, double attn_scale = 1.0);

// SwiGLU: silu(gate) * up. Fused input x [..., 2I] with gate = first I columns, up = last I; or two [..., I].
at::Tensor swiglu(const at::Tensor& x);
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);

// Row argmax of logits [rows, V] (or [V]) -> int32 [rows]; first index on ties (torch.argmax order).
at::Tensor argmax_rows(const at::Tensor& logits);

}  // namespace la::cuda
