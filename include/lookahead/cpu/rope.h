// Rotary position embedding (rotate-half layout, as Hugging Face's Llama) applied in place to a step's q and k.
//
// Batch invariance: elementwise; each value depends only on its own token's vector and position (the cos/sin
// tables are indexed by absolute position), never on the step.
#pragma once
#include <cstdint>

namespace la {

// For each token t and each of `heads` vectors of length D starting at x + t * ldx + h * D:
// x[d] = x[d] * cos[p][d] - x[d + D/2] * sin[p][d] and x[d + D/2] = x[d + D/2] * cos[p][d + D/2] + x[d] * sin[p][d + D/2]
// (old values on the right), p = positions[t]; cos/sin are [max_positions, D] fp32.
void rope_rows(float* x, int ldx, int heads, int D, const int32_t* positions, int T, const float* cos,
               const float* sin);

}  // namespace la
