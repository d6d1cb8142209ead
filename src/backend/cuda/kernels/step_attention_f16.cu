// Instantiates the step attention kernels for one element type (see step_attention.cuh).
#include "step_attention.cuh"

namespace la::kern::detail {
cudaError_t launch_attention_f16(const AttnParams& p, bool mma, cudaStream_t stream) {
  return launch_attention_typed<__half>(p, mma, stream);
}
}  // namespace la::kern::detail
