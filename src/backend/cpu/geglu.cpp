// GeGLU with the tanh-approximate GELU (what and why: include/lookahead/backend/cpu/geglu.h).
#include "lookahead/backend/cpu/geglu.h"

#include <cmath>

#include "rows.h"

namespace la {

void geglu_rows(ThreadPool& pool, const float* gu, int ldgu, int T, int I, float* act, int ldact) {
  const float kBeta = float(M_SQRT2 * M_2_SQRTPI * 0.5), kKappa = 0.044715f;  // ATen's constants
  cpu_detail::for_rows(pool, T, I * 16L, [&](int t) {
    const float* g = gu + long(t) * ldgu;
    const float* u = g + I;
    float* a = act + long(t) * ldact;
    for (int i = 0; i < I; ++i) {
      const float x = g[i], cube = x * x * x;
      const float inner = kBeta * (x + kKappa * cube);
      a[i] = (0.5f * x * (1.f + std::tanh(inner))) * u[i];
    }
  });
}

}  // namespace la
