// Per-head RMSNorm of q and k on the CPU (Qwen3's and Gemma-3's q_norm / k_norm, applied before RoPE), in place:
// each head vector v of length D becomes (v * r) * w with r = 1 / sqrt(mean(v^2) + eps), exactly rmsnorm.h's row
// formula over D instead of hidden (Gemma passes w = 1 + weight, widened to fp32 once).
//
// Batch invariance: the sum of squares of one head uses gemm.h's 8-lane order; each (token, head) vector is
// normalised alone, by one thread, so neither the step nor the thread count can change it.
#pragma once

namespace la {

class ThreadPool;

// For tokens t < T: the `heads` vectors of length D at x + t * ldx + h * D, normalised with the D weights w.
void rms_norm_heads(ThreadPool& pool, float* x, int ldx, int T, int heads, int D, const float* w, float eps);

}  // namespace la
