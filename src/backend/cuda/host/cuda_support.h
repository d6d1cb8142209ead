// Which models the CUDA kernels can serve: host-only (no CUDA, no ATen), so that the check runs in the tests of
// machines without a GPU (tests/cuda_static) as well as in CudaForward::unsupported_reason.
#pragma once
#include <cstdint>
#include <string>

#include "lookahead/model/config.h"

namespace la {

// "" when the kernels serve this model with elements of `element_size` bytes (4: fp32, 2: fp16/bf16); else why not:
// the step attention kernel takes head dims that are multiples of 16 bytes up to 128, every row of the fused q/k/v
// buffer starts 16-byte aligned (cp.async), and query heads come in whole groups per KV head.
// Architecture features (q/k norms, partial rotary, GeGLU, Gemma norms, soft-capping, sliding windows, ...: see
// ModelConfig::features) have no CUDA kernels: the ATen reference forward serves those models on the GPU, and
// the reason names what is missing.
inline std::string cuda_kernels_unsupported_reason(const ModelConfig& c, int element_size) {
  if (!c.features().empty())
    return "the CUDA kernels lack " + c.features() + " (the ATen forward serves this model)";
  const int64_t es = element_size, D = c.head_dim, Q = int64_t(c.heads) * D, KV = int64_t(c.kv_heads) * D;
  if (D <= 0 || D > 128 || (D * es) % 16)
    return "head dim " + std::to_string(D) + " (the step attention kernel needs a multiple of " +
           std::to_string(16 / es) + " up to 128)";
  if ((Q * es) % 16 || (KV * es) % 16) return "q/k/v widths are not 16-byte multiples";
  if (c.kv_heads <= 0 || c.heads % c.kv_heads) return "heads not a multiple of kv heads";
  return "";
}

}  // namespace la
