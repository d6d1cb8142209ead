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
  LA_CHECK(max_tokens >= 1, "cost model: max_tokens must be >= 1 (got ", max_tokens, ")");
  LA_CHECK(seconds_each > 0, "cost model: bucket time must be > 0");
  for (int b = 1; b < max_tokens; b *= 2) buckets_.push_back(b);
  buckets_.push_back(max_tokens);
  secs_.assign(buckets_.size(), seconds_each);
}

void ForwardCostModel::set(int bucket, double seconds) {
  LA_CHECK(std::isfinite(seconds) && seconds > 0, "cost model: bucket time must be finite and > 0");
  for (size_t i = 0; i < buckets_.size(); ++i)
    if (buckets_[i] == bucket) { secs_[i] = seconds; return; }
  fail("cost model: ", bucket, " is not a bucket");
}

namespace {
// Segment i (between buckets i and i+1) holding `t`, and the weight of bucket i+1. One bucket: segment 0, w 0.
std::pair<size_t, double> locate(const std::vector<int>& b, double t) {
  if (b.size() == 1 || t <= b.front()) return {0, 0.0};
  size_t i = std::upper_bound(b.begin(), b.end(), t) - b.begin();  // first bucket > t
  if (i >= b.size()) i = b.size() - 1;                             // beyond the last: extrapolate
  const size_t lo = i - 1;
  return {lo, (t - b[lo]) / double(b[i] - b[lo])};
}
}  // namespace

double ForwardCostModel::seconds(double tokens) const {
  const auto [i, w] = locate(buckets_, tokens);
  if (buckets_.size() == 1) return secs_[0] * std::max(1.0, tokens / buckets_[0]);
  const double v = secs_[i] + w * (secs_[i + 1] - secs_[i]);
  // A forward of more tokens never costs less than one of fewer: noisy buckets (a preempted calibration forward)
  // must not make a draft look cheaper than a plain step.
  double floor = 0;
  for (size_t j = 0; j <= i && j < secs_.size(); ++j) floor = std::max(floor, secs_[j]);
  return std::max({v, floor, 1e-9});
}

void ForwardCostModel::observe(int tokens, double seconds) {
  if (frozen_ || tokens < 1 || !(seconds > 0) || !std::isfinite(seconds)) return;
  ++observations_;
  const double pred = this->seconds(tokens);
  const double lr = std::log(std::clamp(seconds / pred, 0.25, 4.0));
  const auto [i, w0] = locate(buckets_, tokens);
  const double w = std::min(w0, 1.0);  // extrapolated observations update the last bucket only
  if (buckets_.size() == 1) { secs_[0] *= std::exp(alpha_ * lr); return; }
  secs_[i] *= std::exp(alpha_ * (1 - w) * lr);
  secs_[i + 1] *= std::exp(alpha_ * w * lr);
}

double StepCostModel::part_tokens(double plan_tokens) const {
  if (ranks_ <= 1) return plan_tokens;
  return std::clamp(std::ceil(plan_tokens * imbalance_ / ranks_), 1.0, plan_tokens);
}

double StepCostModel::step_seconds(double plan_tokens) const {
  const double t = std::max(1.0, plan_tokens);
  return fwd_.seconds(part_tokens(t)) + (ranks_ > 1 ? latency_s_ : 0.0);
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
