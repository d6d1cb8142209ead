// The GEMM of the step program as plain arguments (raw pointers, no libtorch): shared by the step program
// (src/backend/cuda/cuda_step.h, which issues every projection through a StepLinear), its production implementation
// (cuBLAS, src/backend/cuda/torch_cuda_forward.cpp), the host implementation of the SIMT tests and a fixed-configuration
// GEMM kernel.
#pragma once
#include "kernel_types.h"

namespace la::kern {

// y[m][n] = sum_k x[m][k] * w[n][k] (+ bias[n]) for m < M, n < N, accumulated in fp32 and rounded once to dt.
// w is nn.Linear's weight, row-major [N, K] with row stride ldw; x is [M, K] (row stride ldx), y is [M, N] (row
// stride ldy); bias (N elements) may be null. Every pointer is of element type dt.
struct LinearArgs {
  DType dt;
  int M, N, K;
  const void* x;
  int64_t ldx;
  const void* w;
  int64_t ldw;
  const void* bias;
  void* y;
  int64_t ldy;
};

}  // namespace la::kern
