// Launchers of the fused element-wise kernels (ops.cu); conventions in kernel_types.h.
#pragma once
#include "kernel_types.h"

namespace la::kern {

// Fused element-wise ops. Rows have unit stride over their last dim; row strides are free. A 16-byte vector path
// is used when sizes, pointers and strides allow it, a scalar path otherwise.

// RMSNorm (HF Llama semantics): h = x (+ residual, rounded to dtype); out = w * dtype(h * rsqrt(mean(h^2) + eps)).
// residual may be null. If residual_out is non-null it receives h (it may alias x or residual: in-place update of
// the residual stream). out may alias x. weight has H elements of the same dtype.
cudaError_t launch_rms_norm(DType dt, int rows, int H, const void* x, int64_t x_stride, const void* residual,
                            int64_t residual_stride, void* residual_out, int64_t residual_out_stride,
                            const void* weight, float eps, void* out, int64_t out_stride, cudaStream_t stream);

// RoPE, rotate-half (HF) layout, in place on q [T, Hq, D] and optionally k [T, Hk, D] (k may be null).
// angle[t, i] = positions[t] * inv_freq[i] (fp32), i < D/2; cos/sin are multiplied by attn_scale and, for 16-bit
// dtypes, rounded to the dtype as HF does; then x[i] <- x[i] cos - x[i+D/2] sin, x[i+D/2] <- x[i+D/2] cos + x[i]
// sin, each product and the sum rounded to the dtype like HF's `x * cos + rotate_half(x) * sin`. inv_freq is
// precomputed by the caller (Llama-3 / linear scaling included). Row starts need no alignment.
cudaError_t launch_rope(DType dt, int T, int D, const int32_t* positions, const float* inv_freq, float attn_scale,
                        void* q, int Hq, int64_t q_stride_t, int64_t q_stride_h, void* k, int Hk,
                        int64_t k_stride_t, int64_t k_stride_h, cudaStream_t stream);

// SwiGLU: out[t, i] = dtype(silu(gate[t, i])) * up[t, i] (silu in fp32 and rounded, as torch's F.silu on 16-bit).
// Two inputs, or one fused [T, 2I] buffer with gate = columns [0, I) and up = columns [I, 2I): pass gate = x,
// up = x + I (elements) and both strides 2I.
cudaError_t launch_swiglu(DType dt, int T, int I, const void* gate, int64_t gate_stride, const void* up,
                          int64_t up_stride, void* out, int64_t out_stride, cudaStream_t stream);

// Row gathers (the embedding lookup and the bias broadcast of the step program). Elements are copied bit for bit.
// out[r, :N] = table[ids[r], :N] for r < rows, ids on the device (the step buffer); an id outside [0, vocab)
// gives a row of zeros instead of reading out of bounds (the host checks ids before a step: such a row is a bug).
cudaError_t launch_embed_rows(DType dt, int rows, int N, const int32_t* ids, int vocab, const void* table,
                              int64_t table_stride, void* out, int64_t out_stride, cudaStream_t stream);
// out[r, :N] = row[:N] for r < rows.
cudaError_t launch_broadcast_row(DType dt, int rows, int N, const void* row, void* out, int64_t out_stride,
                                 cudaStream_t stream);

}  // namespace la::kern
