// Forward cost calibration at load (see cost_calibration.h).
#include "lookahead/decode/cost_calibration.h"

#include <algorithm>
#include <vector>

#include "lookahead/util/error.h"

namespace la {

ForwardCostModel calibrate_forward_cost(StepModel& model, int max_plan_tokens, int repeats, CostClock clock) {
  const auto& cfg = model.config();
  const int context = std::min(64, cfg.max_positions / 4);
  const int room = std::max(1, cfg.max_positions - context);
  const int cap = std::clamp(max_plan_tokens, 1, std::min(256, room));
  ForwardCostModel fwd(cap);
  // Arbitrary in-vocabulary tokens: the forward's cost does not depend on their values.
  auto tokens = [&](int n, int salt) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>((7 * i + 3 * salt + 1) % std::max(1, cfg.vocab));
    return t;
  };
  model.truncate(0);
  append_chain(model, tokens(context, 0));
  SampleParams greedy;
  (void)model.forward(StepInput::chain(tokens(cap, 1), context), greedy);  // warm-up, untimed
  for (int b : fwd.buckets()) {
    double best = 1e30;  // seconds
    for (int r = 0; r < std::max(1, repeats) && (r == 0 || best < 0.05); ++r) {  // slow (big models): once
      const auto in = StepInput::chain(tokens(b, 2 + r), context);
      const double t0 = cost_clock_seconds(clock);
      (void)model.forward(in, greedy);
      best = std::min(best, cost_clock_seconds(clock) - t0);
    }
    fwd.set(b, std::max(best, 1e-7));
  }
  model.truncate(0);
  return fwd;
}

}  // namespace la
