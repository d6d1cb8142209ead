// Forward and step cost models (see cost_model.h for the design).
#include "lookahead/decode/cost_model.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "lookahead/util/error.h"

namespace la {

double cost_clock_seconds(CostClock c) {
  if (c == CostClock::ThreadCpu) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* cost_clock_name(CostClock c) { return c == CostClock::ThreadCpu ? "thread-cpu" : "wall"; }

ForwardCostModel::ForwardCostModel(int max_tokens, double seconds_each) {
  LA_CHECK(max_tokens >= 1 && max_tokens <= 4096, "cost model: max_tokens must be in 1..4096 (got ", max_tokens, ")");
  LA_CHECK(seconds_each > 0, "cost model: bucket time must be > 0");
  for (int b = 1; b < max_tokens; b *= 2) {
    buckets_.push_back(b);
    if (b >= 4 && b <= 64 && b + 1 < max_tokens) buckets_.push_back(b + 1);  // a batch's first draft row
  }
  buckets_.push_back(max_tokens);
  secs_.assign(max_tokens, seconds_each);
  floor_ = secs_;
  anchor_.assign(max_tokens, 0);
  for (int b : buckets_) anchor_[b - 1] = 1;
}

void ForwardCostModel::set(int tokens, double seconds) {
  LA_CHECK(std::isfinite(seconds) && seconds > 0, "cost model: bucket time must be finite and > 0");
  LA_CHECK(tokens >= 1 && tokens <= max_tokens(), "cost model: ", tokens, " tokens is outside 1..", max_tokens());
  secs_[tokens - 1] = seconds;
  anchor_[tokens - 1] = 1;
  refill();
}

void ForwardCostModel::refill() {
  const int n = max_tokens();
  int lo = -1;  // the last anchor seen
  for (int i = 0; i < n; ++i) {
    if (!anchor_[i]) continue;
    for (int j = lo + 1; j < i; ++j)  // before the first anchor: its value; between two: linear
      secs_[j] = lo < 0 ? secs_[i] : secs_[lo] + (secs_[i] - secs_[lo]) * double(j - lo) / double(i - lo);
    lo = i;
  }
  for (int j = lo + 1; lo >= 0 && j < n; ++j) secs_[j] = secs_[lo];
  double m = 0;
  for (int i = 0; i < n; ++i) floor_[i] = m = std::max(m, secs_[i]);
}

void ForwardCostModel::set_output_row_seconds(double s) {
  LA_CHECK(std::isfinite(s) && s >= 0, "cost model: an output row's head time must be finite and >= 0");
  head_s_ = s;
}

void ForwardCostModel::set_context_cost(double reference, double row_seconds) {
  LA_CHECK(std::isfinite(reference) && reference >= 0 && std::isfinite(row_seconds) && row_seconds >= 0,
           "cost model: the context cost must be finite and >= 0");
  ref_ctx_ = reference;
  ctx_row_s_ = reference > 0 ? row_seconds : 0.0;
}

double ForwardCostModel::seconds(double tokens) const {
  const int n = max_tokens();
  const double t = std::max(1.0, tokens);
  double v;
  if (t >= n) {  // at or beyond the end: the last two anchors' slope
    v = floor_[n - 1];
    if (buckets_.size() > 1 && t > n) {
      const int a = buckets_[buckets_.size() - 2];
      v += std::max(0.0, (secs_[n - 1] - secs_[a - 1]) / double(n - a)) * (t - n);
    } else if (buckets_.size() == 1) {
      v *= t / n;
    }
  } else {
    const int i = static_cast<int>(t);  // 1 <= i < n
    const double w = t - i;
    // A forward of more tokens never costs less than one of fewer: noisy entries (a preempted calibration
    // forward) must not make a draft look cheaper than a plain step.
    v = std::max(secs_[i - 1] + w * (secs_[i] - secs_[i - 1]), floor_[i - 1]);
  }
  return std::max(v, 1e-9);
}

void ForwardCostModel::observe(int tokens, double seconds) {
  if (frozen_ || tokens < 1 || !(seconds > 0) || !std::isfinite(seconds)) return;
  ++observations_;
  const double lr = std::log(std::clamp(seconds / this->seconds(tokens), 0.25, 4.0));
  const int n = max_tokens();
  const int i = std::min(tokens, n) - 1;  // beyond the end: the last entry only
  // The entry of this size, and its neighbours within kSpread by half as much per step away.
  const int lo = std::max(0, i - kSpread), hi = std::min(n - 1, i + kSpread);
  for (int j = lo; j <= hi; ++j) secs_[j] *= std::exp(alpha_ * lr * std::ldexp(1.0, -std::abs(j - i)));
  anchor_[i] = 1;
  double m = lo > 0 ? floor_[lo - 1] : 0;
  for (int j = lo; j < n; ++j) floor_[j] = m = std::max(m, secs_[j]);
}

double StepCostModel::part_tokens(double plan_tokens) const {
  if (ranks_ <= 1) return plan_tokens;
  return std::clamp(std::ceil(plan_tokens * imbalance_ / ranks_), 1.0, plan_tokens);
}

double StepCostModel::context_seconds(double tokens, double context) const {
  const double c = context >= 0 ? context : ctx_;
  if (c < 0 || fwd_.context_row_seconds() <= 0) return 0.0;
  return tokens * fwd_.context_row_seconds() * (c - fwd_.reference_context());
}

double StepCostModel::step_seconds(double plan_tokens, double silent_rows, double context) const {
  const double t = std::max(1.0, plan_tokens), part = part_tokens(t);
  // A context shorter than calibration's makes a step cheaper, never below half its reference time.
  const double at_ref = fwd_.seconds(part);
  const double full = std::max(0.5 * at_ref, at_ref + context_seconds(part, context));
  // The slowest part's share of the silent rows skips the head; never below a tenth of the full step (a head
  // measured too dear must not make a prompt chunk free).
  const double silent = std::clamp(silent_rows, 0.0, t) * part / t;
  return std::max(0.1 * full, full - fwd_.output_row_seconds() * silent) + (ranks_ > 1 ? latency_s_ : 0.0);
}

void StepCostModel::observe_forward(int tokens, double seconds, int silent_rows, double context) {
  // Booked as a forward whose every row chooses a token (a silent row's head added back) at the reference context.
  const double whole = seconds + fwd_.output_row_seconds() * std::max(0, silent_rows);
  fwd_.observe(tokens, std::max(0.5 * whole, whole - context_seconds(tokens, context)));
}

void StepCostModel::observe_parts(int plan_tokens, int max_part_tokens) {
  if (frozen_ || ranks_ <= 1 || plan_tokens < ranks_ || max_part_tokens < 1) return;  // tiny plans: no signal
  const double r = std::clamp(max_part_tokens * double(ranks_) / plan_tokens, 1.0, double(ranks_));
  imbalance_ += 0.05 * (r - imbalance_);
}

void StepCostModel::observe_latency(double seconds) {
  if (frozen_ || !(seconds >= 0) || !std::isfinite(seconds)) return;
  latency_s_ += 0.05 * (seconds - latency_s_);
}

}  // namespace la
