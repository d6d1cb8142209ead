// Position-keyed sampling of next tokens from a step's logits (private to src/engine; includes ATen).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "lookahead/model/step_model.h"

namespace la {

// For each row of logits [T, V] (fp32), the token drawn with temperature, top-k and top-p, using the uniform
// variate position_uniform(seed, stream, positions[t] + 1): the same position draws the same variate in every
// strategy and on every rank, which is what makes verification of deterministic drafts exact.
at::Tensor sample_tokens(const at::Tensor& logits, const std::vector<int32_t>& positions, const SampleParams& sp);

}  // namespace la
