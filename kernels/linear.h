// kernels/linear.h
#pragma once
#include <cstdint>
#include "kernel_types.h"
namespace la::kern {
// y[m][n] = sum_k x[m][k] * w[n][k] (+ bias[n]), fp32 accumulation, y rounded to dt; w is nn.Linear's row-major [N, K].
struct LinearArgs {
  DType dt = DType::F32;
  int M = 0, N = 0, K = 0;
  const void* x = nullptr; int64_t ldx = 0;
  const void* w = nullptr; int64_t ldw = 0;
  const void* bias = nullptr;  // [N] or null
  void* y = nullptr; int64_t ldy = 0;
};
}
