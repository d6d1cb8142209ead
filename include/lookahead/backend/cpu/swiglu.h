// SwiGLU on the CPU: act[t][i] = silu(gate[t][i]) * up[t][i], silu(g) = g / (1 + exp(-g)) (ATen's formula).
//
// Batch invariance: elementwise; rows split across threads, each value computed alone.
#pragma once

namespace la {

class ThreadPool;

// gu: [T, 2I] (gate then up, ldgu floats per row); act: [T, I] (ldact per row).
void swiglu_rows(ThreadPool& pool, const float* gu, int ldgu, int T, int I, float* act, int ldact);

}  // namespace la
