// RMSNorm on the CPU: y[t] = (x[t] * r) * w with r = 1 / sqrt(mean(x[t]^2) + eps), in fp32 (as Hugging Face's
// LlamaRMSNorm does for fp32 activations). Gemma's (1 + w) scaling is this with w + 1 (the caller widens the weight
// and adds 1 in fp32 once, as transformers' Gemma2RMSNorm computes 1.0 + weight.float()).
//
// Batch invariance: the sum of squares of a row uses the GEMM's 8-lane order (gemm.h's dot_f32 of the row with
// itself); each row is normalised by one thread, independently of every other row.
#pragma once

namespace la {

class ThreadPool;

// Rows t < T of x (ldx floats apart) into y (ldy apart); w: H fp32 weights.
void rms_norm_rows(ThreadPool& pool, const float* x, int ldx, const float* w, int T, int H, float eps, float* y,
                   int ldy);

}  // namespace la
