// exp(x) in fp32 for the CPU kernels' softmax and SiLU, written once as a sequence of IEEE operations (range
// reduction by ln 2, a degree-6 polynomial by fma, scaling by 2^n in the exponent bits) and done by both ISA
// paths in the same order: the portable scalar form and the AVX2 form give the same bits, which libm's expf and a
// vector exp from a library would not promise each other (private to src/backend/cpu; AVX2 form only with LA_AVX2).
//
// Accuracy: within 2 ulp of exp over [-87, 88]; below -87 the result is 0 (exp(-87) = 1.6e-38, nothing a softmax
// weight or a SiLU can see), above 88 it is +inf; NaN stays NaN.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include "avx2_lanes.h"
#endif

namespace la {
namespace expf_detail {
constexpr float kLo = -87.f, kHi = 88.f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 = hi + lo, hi exact in 9 bits
// exp(r) - 1 - r ~ r^2 (c0 + r (c1 + r (c2 + r (c3 + r c4)))) for |r| <= ln2 / 2 (Cephes' expf coefficients).
constexpr float kC0 = 5.0000001201e-1f, kC1 = 1.6666665459e-1f, kC2 = 4.1665795894e-2f, kC3 = 8.3334519073e-3f,
                kC4 = 1.3981999507e-3f;
constexpr float kC5 = 1.9875691500e-4f;
}  // namespace expf_detail

inline float expf_lanes(float x) {
  using namespace expf_detail;
  if (std::isnan(x)) return x;
  if (x < kLo) return 0.f;
  if (x > kHi) return INFINITY;
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(-n, kLn2Hi, x);
  r = std::fma(-n, kLn2Lo, r);
  float p = kC5;
  p = std::fma(p, r, kC4);
  p = std::fma(p, r, kC3);
  p = std::fma(p, r, kC2);
  p = std::fma(p, r, kC1);
  p = std::fma(p, r, kC0);
  const float r2 = r * r;
  const float e = std::fma(p, r2, r) + 1.f;
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;  // n in [-126, 127]: a normal power of two
  float scale;
  std::memcpy(&scale, &bits, 4);
  return e * scale;
}

#if defined(__x86_64__)
LA_AVX2 inline __m256 expf_lanes_avx2(__m256 x) {
  using namespace expf_detail;
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 lo = _mm256_cmp_ps(x, _mm256_set1_ps(kLo), _CMP_LT_OQ);
  const __m256 hi = _mm256_cmp_ps(x, _mm256_set1_ps(kHi), _CMP_GT_OQ);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kLo)), _mm256_set1_ps(kHi));  // safe lanes
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 nn = _mm256_sub_ps(_mm256_setzero_ps(), n);
  __m256 r = _mm256_fmadd_ps(nn, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fmadd_ps(nn, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kC5);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC0));
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(e, _mm256_castsi256_ps(bits));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), lo);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), hi);
  return _mm256_blendv_ps(y, x, nan);
}
#endif

}  // namespace la
