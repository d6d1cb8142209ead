// The AVX2/FMA skinny GEMM (why it exists: include/lookahead/model/cpu_gemm.h). Only the functions marked with the
// avx2,fma target use those instructions; cpu_gemm_supported() is ordinary code and checks the CPU first.
#include "lookahead/model/cpu_gemm.h"

#include <cstddef>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define LA_CPU_GEMM_AVX2 1
#define LA_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace la {

#ifdef LA_CPU_GEMM_AVX2
namespace {

LA_AVX2 inline float lane_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// R weight rows (w, stride K) times C token rows (x, stride K) -> y[c * ldy + r]. R x C accumulators of 8 lanes
// plus R weight vectors fit the 16 ymm registers for R = 4, C = 3.
template <int R, int C>
LA_AVX2 void block(const float* x, const float* w, int K, float* y, int ldy) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  const int K8 = K & ~7;
  for (int k = 0; k < K8; k += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = _mm256_loadu_ps(w + static_cast<size_t>(r) * K + k);
    for (int c = 0; c < C; ++c) {
      const __m256 xv = _mm256_loadu_ps(x + static_cast<size_t>(c) * K + k);
      for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(wv[r], xv, acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float s = lane_sum(acc[r][c]);
      for (int k = K8; k < K; ++k) s += w[static_cast<size_t>(r) * K + k] * x[static_cast<size_t>(c) * K + k];
      y[static_cast<size_t>(c) * ldy + r] = s;
    }
}

// R weight rows times all M token rows, 3 token rows at a time (the weight rows stay in L1 between the blocks).
template <int R>
LA_AVX2 void weight_rows(const float* x, int M, int K, const float* w, float* y, int ldy) {
  int t = 0;
  for (; t + 3 <= M; t += 3) block<R, 3>(x + static_cast<size_t>(t) * K, w, K, y + static_cast<size_t>(t) * ldy, ldy);
  if (M - t == 2) block<R, 2>(x + static_cast<size_t>(t) * K, w, K, y + static_cast<size_t>(t) * ldy, ldy);
  if (M - t == 1) block<R, 1>(x + static_cast<size_t>(t) * K, w, K, y + static_cast<size_t>(t) * ldy, ldy);
}

LA_AVX2 void gemm_avx2(const float* x, int M, int K, const float* w, int n0, int n1, float* y, int ldy) {
  int n = n0;
  for (; n + 4 <= n1; n += 4) weight_rows<4>(x, M, K, w + static_cast<size_t>(n) * K, y + n, ldy);
  for (; n < n1; ++n) weight_rows<1>(x, M, K, w + static_cast<size_t>(n) * K, y + n, ldy);
}

}  // namespace

bool cpu_gemm_supported() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

void cpu_gemm_rows(const float* x, int M, int K, const float* w, int n0, int n1, float* y, int ldy) {
  gemm_avx2(x, M, K, w, n0, n1, y, ldy);
}

#else

bool cpu_gemm_supported() { return false; }
void cpu_gemm_rows(const float*, int, int, const float*, int, int, float*, int) {}

#endif

}  // namespace la
