// Rotary position embedding (rotate-half layout, as Hugging Face's Llama) applied in place to a step's q and k:
// the first R dims of each head (R = head_dim, or head_dim x partial_rotary_factor for Phi-3 variants; the other
// D - R dims pass unchanged).
//
// Batch invariance: elementwise; each value depends only on its own token's vector and position (the cos/sin
// tables are indexed by absolute position), never on the step.
#pragma once
#include <cstdint>

namespace la {

// For each token t and each of `heads` vectors of length D starting at x + t * ldx + h * D, for d < R/2:
// x[d] = x[d] * cos[p][d] - x[d + R/2] * sin[p][d] and x[d + R/2] = x[d + R/2] * cos[p][d + R/2] + x[d] * sin[p][d + R/2]
// (old values on the right), p = positions[t]; cos/sin are [max_positions, R] fp32.
void rope_rows(float* x, int ldx, int heads, int D, int R, const int32_t* positions, int T, const float* cos,
               const float* sin);

}  // namespace la
