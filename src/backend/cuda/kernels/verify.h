// Launcher of the row argmax of greedy verification (verify.cu); conventions in kernel_types.h.
#pragma once
#include "kernel_types.h"

namespace la::kern {

// Greedy verification.

// out[r] = argmax_v logits[r, v] (first index on ties, NaN counts as the maximum, like torch.argmax).
cudaError_t launch_argmax_rows(DType dt, int rows, int V, const void* logits, int64_t row_stride, int32_t* out,
                               cudaStream_t stream);

}  // namespace la::kern
