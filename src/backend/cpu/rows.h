// Private to src/backend/cpu: the row loop of the element-wise kernels, and the one RMSNorm row formula that rmsnorm.h and
// head_norm.h share (so both round the same way).
#pragma once
#include <cmath>
#include <cstdint>

#include "lookahead/backend/cpu/gemm.h"
#include "lookahead/backend/cpu/thread_pool.h"

namespace la {
namespace cpu_detail {

// Rows [0, T) split evenly over the pool; small jobs stay on the calling thread. Each row is computed by one
// participant alone, so the split never changes a value.
template <class F>
void for_rows(ThreadPool& pool, int T, long work_per_row, F&& f) {
  if (pool.size() == 1 || T == 1 || T * work_per_row < 32768) {
    for (int t = 0; t < T; ++t) f(t);
    return;
  }
  pool.run([&](int i, int n) {
    for (int t = int(int64_t(T) * i / n); t < int(int64_t(T) * (i + 1) / n); ++t) f(t);
  });
}

// y = (x * r) * w, r = 1 / sqrt(sum(x^2) / H + eps), the sum in gemm.h's 8-lane order (y may alias x).
inline void rms_norm_row(const float* x, const float* w, int H, float eps, float* y) {
  const float r = 1.f / std::sqrt(dot_f32(x, x, H) / float(H) + eps);
  for (int i = 0; i < H; ++i) y[i] = (x[i] * r) * w[i];
}

}  // namespace cpu_detail
}  // namespace la
