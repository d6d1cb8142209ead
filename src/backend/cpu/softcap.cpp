// Final-logit soft-capping (what and why: include/lookahead/backend/cpu/softcap.h).
#include "lookahead/backend/cpu/softcap.h"

#include <cmath>

#include "rows.h"

namespace la {

void softcap_rows(ThreadPool& pool, float* x, int ld, int T, int n, float cap) {
  cpu_detail::for_rows(pool, T, n * 8L, [&](int t) {
    float* r = x + long(t) * ld;
    for (int i = 0; i < n; ++i) r[i] = std::tanh(r[i] / cap) * cap;
  });
}

}  // namespace la
