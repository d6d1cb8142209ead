// RMSNorm, RoPE and SwiGLU on the CPU (one header each: rmsnorm.h, rope.h, swiglu.h). Plain C++ (a few percent of
// a step; with contraction off it rounds the same way on every ISA), except SwiGLU's exp: expf_lanes.h, whose
// AVX2 form gives the scalar form's bits 8 lanes at a time.
#include <cmath>

#include "lookahead/backend/cpu/gemm.h"
#include "lookahead/backend/cpu/rmsnorm.h"
#include "lookahead/backend/cpu/rope.h"
#include "lookahead/backend/cpu/swiglu.h"
#include "lookahead/backend/cpu/isa.h"
#include "lookahead/backend/cpu/thread_pool.h"
#include "rows.h"

#include "expf_lanes.h"

namespace la {
using cpu_detail::for_rows;

void rms_norm_rows(ThreadPool& pool, const float* x, int ldx, const float* w, int T, int H, float eps, float* y,
                   int ldy) {
  for_rows(pool, T, H, [&](int t) {
    cpu_detail::rms_norm_row(x + long(t) * ldx, w, H, eps, y + long(t) * ldy);
  });
}

void rope_rows(float* x, int ldx, int heads, int D, int R, const int32_t* positions, int T, const float* cos,
               const float* sin) {
  const int half = R / 2;
  for (int t = 0; t < T; ++t) {
    const float* c = cos + long(positions[t]) * R;
    const float* s = sin + long(positions[t]) * R;
    for (int h = 0; h < heads; ++h) {
      float* v = x + long(t) * ldx + long(h) * D;
      for (int d = 0; d < half; ++d) {
        const float a = v[d], b = v[d + half];
        v[d] = a * c[d] + (-b) * s[d];
        v[d + half] = b * c[d + half] + a * s[d + half];
      }
    }
  }
}

#if defined(__x86_64__)
// The same operations per element as the scalar loop below, 8 at a time; returns how far it got.
LA_AVX2 int swiglu_avx2(const float* g, const float* u, int I, float* a) {
  const __m256 one = _mm256_set1_ps(1.f), neg = _mm256_set1_ps(-0.f);
  int i = 0;
  for (; i + 8 <= I; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 e = expf_lanes_avx2(_mm256_xor_ps(gv, neg));  // -g: a sign flip, as the scalar form
    _mm256_storeu_ps(a + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
  }
  return i;
}
#endif

void swiglu_rows(ThreadPool& pool, const float* gu, int ldgu, int T, int I, float* act, int ldact) {
  const bool avx2 = cpu_avx2();
  for_rows(pool, T, I * 8L, [&](int t) {
    const float* g = gu + long(t) * ldgu;
    const float* u = g + I;
    float* a = act + long(t) * ldact;
    int i = 0;
#if defined(__x86_64__)
    if (avx2) i = swiglu_avx2(g, u, I, a);
#endif
    for (; i < I; ++i) a[i] = (g[i] / (1.f + expf_lanes(-g[i]))) * u[i];
  });
}

}  // namespace la
