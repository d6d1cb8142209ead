// Forward cost calibration at load (see cost_calibration.h).
#include "lookahead/decode/cost_calibration.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lookahead/util/error.h"

namespace la {

namespace {

// The warm-up's size: the calibration's largest step up to this. A larger warm-up paid more than its step again
// (a 256-row warm-up was 0.66 s of a 2.6 s calibration on SmolLM2, 2 threads); the first larger timed step then
// also grows the forward's buffers, a few percent of its time that later real steps correct.
constexpr int kWarmupRows = 64;

// Buckets above kLinearFrom rows (65, 128, 256: prompt chunks and large batches) are extrapolated, not timed, when the
// forward is already linear in its rows from kLinearFrom / 2 to kLinearFrom (the time per row of the two within
// kLinearTolerance) and the kLinearFrom-row forward takes at least kLinearMinSeconds: a compute-bound forward, whose
// larger steps cost their rows (SmolLM2 fp32, 2 threads: 32 / 64 / 128 rows 70.7 / 137.3 / 270.0 ms, 2.08 ms a row
// both ways). Timing them cost ~1 s of every batch job's start there (65 + 128 + 256 rows). A flat (GPU) or tiny
// forward is timed as before; real steps of those sizes then correct the estimate like any bucket's.
constexpr int kLinearFrom = 64;
constexpr double kLinearTolerance = 0.1;
constexpr double kLinearMinSeconds = 0.01;

// The LM head's time per output row is measured on a step of at least this many rows (the largest timed bucket up
// to 64, timed once more without output rows); smaller calibrations, and those that time nothing, keep what
// `known` measured (or 0: every row priced with its head).
constexpr int kHeadFrom = 16;

// The context's cost (cost_model.h, "Context"): the largest bucket timed up to kContextRows is timed again with
// kContextMore more positions in the cache (SmolLM2: 64 -> 160 positions, a 96-row prefill and 3 forwards of 16
// rows, ~0.3 s on 2 threads); what it took more, per row and position, prices every row's context beyond the
// reference. On SmolLM2 that is 3.5 us a row and position: 16 rows +12% at 160 positions, well above the
// fastest-of-3's noise. (96, not a bucket's size: the calibration tests tell the buckets' forwards apart.)
constexpr int kContextRows = 16;
constexpr int kContextMore = 96;

// The seconds of the bucket of `tokens` rows in `secs` (one per bucket), or 0 if there is no such bucket.
double seconds_at(const std::vector<int>& buckets, const std::vector<double>& secs, int tokens) {
  const auto it = std::find(buckets.begin(), buckets.end(), tokens);
  return it == buckets.end() ? 0 : secs[it - buckets.begin()];
}

// The seconds `known` stored for a bucket of `tokens` rows, or 0 if it has no such bucket.
double known_seconds(const ForwardCostModel* known, int tokens) {
  if (!known) return 0;
  const auto& b = known->buckets();
  for (size_t i = 0; i < b.size(); ++i)
    if (b[i] == tokens) return known->bucket_seconds(i);
  return 0;
}

// Seconds a row above kLinearFrom rows when the curve is linear from kLinearFrom / 2 to kLinearFrom (see above),
// else 0 (time those buckets).
double linear_slope(const std::vector<int>& buckets, const std::vector<double>& secs) {
  const double half = seconds_at(buckets, secs, kLinearFrom / 2), full = seconds_at(buckets, secs, kLinearFrom);
  if (half <= 0 || full < kLinearMinSeconds) return 0;
  const double per_row_ratio = (full / kLinearFrom) / (half / (kLinearFrom / 2));
  if (std::abs(per_row_ratio - 1) > kLinearTolerance) return 0;
  return (full - half) / (kLinearFrom / 2);
}

// What the LM head adds per output row, from a forward of `rows` rows timed with every row an output (`with_head`)
// and with none: at most 90% of a row (a noisy pair must not make prompt rows nearly free; cost_model.h).
double output_row_seconds(int rows, double with_head, double without) {
  return std::clamp((with_head - without) / rows, 0.0, 0.9 * with_head / rows);
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
  std::vector<double> secs(buckets.size());  // 0: to be timed (or extrapolated)
  int largest = 0;                            // the largest bucket up to kLinearFrom to time (0: none)
  for (size_t i = 0; i < buckets.size(); ++i)
    if ((secs[i] = known_seconds(known, buckets[i])) <= 0 && buckets[i] <= kLinearFrom) largest = buckets[i];
  // Arbitrary in-vocabulary tokens: the forward's cost does not depend on their values.
  auto tokens = [&](int n, int salt) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>((7 * i + 3 * salt + 1) % std::max(1, cfg.vocab));
    return t;
  };
  bool ready = false;  // the context is in the cache and the warm-up has run
  SampleParams greedy;
  int cached = context;  // positions in the cache once ready
  auto time_forward = [&](int b, bool silent = false) {
    if (!ready) {
      model.truncate(0);
      append_chain(model, tokens(context, 0));
      const int warm = std::min(std::max(largest, b), kWarmupRows);
      (void)model.forward(StepInput::chain(tokens(warm, 1), context), greedy);  // warm-up, untimed
      ready = true;
    }
    double best = 1e30;  // seconds
    for (int r = 0; r < std::max(1, repeats) && (r == 0 || best < 0.05); ++r) {  // slow (big models): once
      auto in = StepInput::chain(tokens(b, 2 + r), cached);
      if (silent) in.first_output = b;  // no row chooses a next token: no LM head
      const double t0 = cost_clock_seconds(clock);
      (void)model.forward(in, greedy);
      best = std::min(best, cost_clock_seconds(clock) - t0);
    }
    return std::max(best, 1e-7);
  };
  // Up to kLinearFrom rows: every bucket not known is timed. Above: extrapolated where the curve is linear.
  for (size_t i = 0; i < buckets.size() && buckets[i] <= kLinearFrom; ++i)
    if (secs[i] <= 0) secs[i] = time_forward(buckets[i]);
  // The LM head's share of a row: the largest bucket timed here again with no output row (a prompt chunk's
  // forward), or what `known` measured.
  double head = known ? known->output_row_seconds() : 0;
  if (largest >= kHeadFrom)
    head = output_row_seconds(largest, seconds_at(buckets, secs, largest), time_forward(largest, true));
  const double slope = linear_slope(buckets, secs);
  const double at_from = seconds_at(buckets, secs, kLinearFrom);
  for (size_t i = 0; i < buckets.size(); ++i)
    if (secs[i] <= 0) secs[i] = slope > 0 ? at_from + slope * (buckets[i] - kLinearFrom) : time_forward(buckets[i]);
  // The context's cost: what `known` measured, else the largest bucket up to kContextRows timed again at a
  // longer context (none timed, or no room for it: no context term).
  double ctx_ref = known ? known->reference_context() : 0, ctx_row = known ? known->context_row_seconds() : 0;
  int at = 0;
  for (int b : buckets)  // every bucket has its seconds by now
    if (b <= kContextRows) at = b;
  const int longer = std::min(context + kContextMore, cfg.max_positions - at);
  if (ctx_ref <= 0 && ready && at > 0 && longer >= context + kContextMore / 2) {
    append_chain(model, tokens(longer - context, 3));
    cached = longer;
    const double t_long = time_forward(at);
    ctx_ref = context;
    ctx_row = std::max(0.0, (t_long - seconds_at(buckets, secs, at)) / (double(at) * (longer - context)));
  }
  if (ready) model.truncate(0);
  for (size_t i = 0; i < buckets.size(); ++i) fwd.set(buckets[i], secs[i]);
  fwd.set_output_row_seconds(head);
  fwd.set_context_cost(ctx_ref, ctx_row);
  return fwd;
}

}  // namespace la
