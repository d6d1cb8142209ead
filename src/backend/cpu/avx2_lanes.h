// The AVX2 pieces gemm.cpp and attention.cpp share (private to src/backend/cpu): 8 weights widened to fp32, and the fixed
// fold of 8 lanes that gemm.h states. Only for functions compiled with LA_AVX2, called where cpu_isa() is Avx2.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "lookahead/model/dtype.h"

#define LA_AVX2 __attribute__((target("avx2,fma,f16c")))
// The AVX-512 tiles (gemm.cpp, gemm_quant.cpp): called only where cpu_isa() is Avx512.
#define LA_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))

namespace la {

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), the order of the portable path.
LA_AVX2 inline float fold_avx2(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // l + (l + 4)
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                              // (0+4)+(2+6), (1+5)+(3+7)
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// Elements idx .. idx+7 of a vector of type WT, widened to fp32 (exact).
template <WType WT>
LA_AVX2 inline __m256 wload_avx2(const void* w, size_t idx) {
  if constexpr (WT == WType::F32) {
    return _mm256_loadu_ps(static_cast<const float*>(w) + idx);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + idx));
    if constexpr (WT == WType::BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
  }
}

// The same with the type known only at run time.
LA_AVX2 inline __m256 load8_avx2(const void* p, WType t, size_t idx) {
  if (t == WType::F32) return wload_avx2<WType::F32>(p, idx);
  if (t == WType::BF16) return wload_avx2<WType::BF16>(p, idx);
  return wload_avx2<WType::F16>(p, idx);
}

}  // namespace la
#endif
