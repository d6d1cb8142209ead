// RMSNorm, RoPE and SwiGLU on the CPU (one header each: rmsnorm.h, rope.h, swiglu.h). Plain C++: these are a few
// percent of a step, so one implementation serves every ISA, and with contraction off it rounds the same way on
// all of them.
#include <cmath>

#include "lookahead/cpu/gemm.h"
#include "lookahead/cpu/rmsnorm.h"
#include "lookahead/cpu/rope.h"
#include "lookahead/cpu/swiglu.h"
#include "lookahead/cpu/thread_pool.h"
#include "rows.h"

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

void swiglu_rows(ThreadPool& pool, const float* gu, int ldgu, int T, int I, float* act, int ldact) {
  for_rows(pool, T, I * 8L, [&](int t) {
    const float* g = gu + long(t) * ldgu;
    const float* u = g + I;
    float* a = act + long(t) * ldact;
    for (int i = 0; i < I; ++i) a[i] = (g[i] / (1.f + std::exp(-g[i]))) * u[i];
  });
}

}  // namespace la
