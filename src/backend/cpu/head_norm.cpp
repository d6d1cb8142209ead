// Per-head q/k RMSNorm (what and why: include/lookahead/backend/cpu/head_norm.h).
#include "lookahead/backend/cpu/head_norm.h"

#include "rows.h"

namespace la {

void rms_norm_heads(ThreadPool& pool, float* x, int ldx, int T, int heads, int D, const float* w, float eps) {
  cpu_detail::for_rows(pool, T, long(heads) * D, [&](int t) {
    for (int h = 0; h < heads; ++h) {
      float* v = x + long(t) * ldx + long(h) * D;
      cpu_detail::rms_norm_row(v, w, D, eps, v);
    }
  });
}

}  // namespace la
