// Forward cost calibration at load (see cost_calibration.h).
#include "lookahead/decode/cost_calibration.h"

#include <algorithm>
#include <vector>

#include "lookahead/util/error.h"

namespace la {

namespace {

// The warm-up's size: the calibration's largest step up to this. A larger warm-up paid more than its step again
// (a 256-row warm-up was 0.66 s of a 2.6 s calibration on SmolLM2, 2 threads); the first larger timed step then
// also grows the forward's buffers, a few percent of its time that later real steps correct.
constexpr int kWarmupRows = 64;

// The seconds `known` stored for a bucket of `tokens` rows, or 0 if it has no such bucket.
double known_seconds(const ForwardCostModel* known, int tokens) {
  if (!known) return 0;
  const auto& b = known->buckets();
  for (size_t i = 0; i < b.size(); ++i)
    if (b[i] == tokens) return known->bucket_seconds(i);
  return 0;
}

}  // namespace

ForwardCostModel calibrate_forward_cost(StepModel& model, int max_plan_tokens, int repeats, CostClock clock,
                                        const ForwardCostModel* known) {
  const auto& cfg = model.config();
  const int context = std::min(64, cfg.max_positions / 4);
  const int room = std::max(1, cfg.max_positions - context);
  const int cap = std::clamp(max_plan_tokens, 1, std::min(256, room));
  ForwardCostModel fwd(cap);
  const std::vector<int>& buckets = fwd.buckets();
  std::vector<double> secs(buckets.size());  // 0: to be timed
  int largest = 0;                            // the largest bucket to time (0: none)
  for (size_t i = 0; i < buckets.size(); ++i)
    if ((secs[i] = known_seconds(known, buckets[i])) <= 0) largest = buckets[i];
  if (largest > 0) {
    // Arbitrary in-vocabulary tokens: the forward's cost does not depend on their values.
    auto tokens = [&](int n, int salt) {
      std::vector<int32_t> t(n);
      for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>((7 * i + 3 * salt + 1) % std::max(1, cfg.vocab));
      return t;
    };
    model.truncate(0);
    append_chain(model, tokens(context, 0));
    SampleParams greedy;
    const int warm = std::min(largest, kWarmupRows);
    (void)model.forward(StepInput::chain(tokens(warm, 1), context), greedy);  // warm-up, untimed
    for (size_t i = 0; i < buckets.size(); ++i) {
      if (secs[i] > 0) continue;
      const int b = buckets[i];
      double best = 1e30;  // seconds
      for (int r = 0; r < std::max(1, repeats) && (r == 0 || best < 0.05); ++r) {  // slow (big models): once
        const auto in = StepInput::chain(tokens(b, 2 + r), context);
        const double t0 = cost_clock_seconds(clock);
        (void)model.forward(in, greedy);
        best = std::min(best, cost_clock_seconds(clock) - t0);
      }
      secs[i] = std::max(best, 1e-7);
    }
    model.truncate(0);
  }
  for (size_t i = 0; i < buckets.size(); ++i) fwd.set(buckets[i], secs[i]);
  return fwd;
}

}  // namespace la
