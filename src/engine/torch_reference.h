// The ATen reference forward (private to src/engine; includes ATen): `--kernels off`, the path every kernel
// forward is tested against, and the path for shapes or devices no kernel serves.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "lookahead/model/step_model.h"
#include "torch_weights.h"

namespace la {

// RoPE tables as Hugging Face computes them: float32 inv_freq times float32 positions, then cos/sin. R is the
// rotated part of each head (head_dim, or head_dim x partial_rotary_factor for Phi-3 variants).
struct RopeTables {
  at::Tensor inv_freq;  // [R/2] fp32
  at::Tensor cos, sin;  // [max_positions, R] fp32 (the two halves repeat)
  // Gemma-3's sliding layers: their own base (local_rope_theta), unscaled. Undefined when they share the above.
  at::Tensor cos_local, sin_local;
};
RopeTables make_rope_tables(const ModelConfig& cfg, at::Device dev);

// The model's KV cache: per layer [capacity, kv_heads, head_dim] in the model's dtype on its device.
struct KvCache {
  std::vector<at::Tensor> k, v;
  int capacity() const { return k.empty() ? 0 : static_cast<int>(k[0].size(0)); }
};
// A cache of `cap` rows whose first `keep` rows are copied from `old` (if given).
KvCache make_kv_cache(const TorchWeights& w, int cap, const KvCache* old = nullptr, int keep = 0);

// The step's logits [T, V] (fp32) on top of L committed cache rows; writes the step's K/V at rows L .. L+T-1
// (the caller guarantees capacity). Each step token attends to the cache and to its ancestors in the step; in a
// sliding-window layer only to those at positions > its own - sliding_window (cache row r holds position r).
at::Tensor reference_forward(const TorchWeights& w, const RopeTables& rope, KvCache& cache, const StepInput& in,
                             int L);

}  // namespace la
