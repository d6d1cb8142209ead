// Greedy verification on the device: the row argmax of the step logits (the host walks the tree: verify_plan).
#include <climits>

#include "common.cuh"
#include "verify.h"

namespace la::kern {
namespace detail {
namespace {

// torch.argmax order: NaN is the maximum; among equal values the first index wins.
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  if (isnan(v)) return !isnan(bv) || i < bi;
  if (isnan(bv)) return false;
  return v > bv || (v == bv && i < bi);
}

template <class E, int V>
__global__ void argmax_kernel(int n, const E* __restrict__ logits, int64_t stride, int32_t* __restrict__ out) {
  const E* row = logits + int64_t(blockIdx.x) * stride;
  float bv = -INFINITY;
  int bi = INT_MAX;
  for (int i = threadIdx.x * V; i < n; i += blockDim.x * V) {
    float a[V];
    load_f<E, V>(row + i, a);
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (better(a[k], i + k, bv, bi)) bv = a[k], bi = i + k;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  __shared__ float sv[32];
  __shared__ int si[32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  if (lane == 0) sv[warp] = bv, si[warp] = bi;
  __syncthreads();
  if (warp == 0) {
    bv = lane < nw ? sv[lane] : -INFINITY;
    bi = lane < nw ? si[lane] : INT_MAX;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if (lane == 0) out[blockIdx.x] = bi == INT_MAX ? 0 : bi;
  }
}

}  // namespace
}  // namespace detail

cudaError_t launch_argmax_rows(DType dt, int rows, int V, const void* logits, int64_t row_stride, int32_t* out,
                               cudaStream_t stream) {
  using namespace detail;
  if (rows < 0 || V <= 0 || (rows > 0 && (!logits || !out))) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const size_t es = dtype_size(dt);
  const int vv = int(16 / es);
  const bool vec = V % vv == 0 && aligned16(logits) && (row_stride * int64_t(es)) % 16 == 0;
  const int threads = 512;
  return dispatch_dtype(dt, [&](auto tag) {
    using E = decltype(tag);
    constexpr int VV = 16 / sizeof(E);
    const E* l = static_cast<const E*>(logits);
    if (vec)
      LA_LAUNCH(rows, threads, 0, stream, argmax_kernel<E, VV>)(V, l, row_stride, out);
    else
      LA_LAUNCH(rows, threads, 0, stream, argmax_kernel<E, 1>)(V, l, row_stride, out);
    return cudaGetLastError();
  });
}

}  // namespace la::kern
