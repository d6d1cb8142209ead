// Cost model of one step on the device at hand: seconds of a forward as a function of its step tokens T, and of
// a K-rank lookahead-parallel step. No libtorch, no devices: strategies never see this; the draft controller
// (draft_controller.h) asks it "what does a plan of T tokens cost" and nothing else.
//
// Design (why this shape):
// * Per-replica forward time f(T) is stored at buckets T = 1, 2, 4, ..., 256 (the sizes the GPU path pads step
//   graphs to, and enough resolution for the CPU, where f is close to affine between powers of two) and read
//   piecewise-linearly between buckets; beyond the last bucket it is extrapolated with the last segment's slope.
//   Reads are floored by every smaller bucket (the cost never decreases with T), so one noisy bucket cannot make
//   a larger plan look cheaper than a smaller one.
//   A parametric fit (a + bT) would miss the knees measured here (README: 16 -> 64 tokens is flat-ish, 64 -> 128
//   triples) and a GPU's plateau.
// * Calibration (cost_calibration.h) sets the buckets from a few timed forwards at load. After that every real
//   forward (executor side: LocalExecutor, so every replica of a ParallelExecutor) feeds observe(T, seconds),
//   which moves the two neighbouring buckets toward the observation multiplicatively (an EWMA of the log ratio
//   measured/predicted, split by the interpolation weights). Log-space and a clamped ratio keep one stall of
//   this shared machine (another process building) from wrecking the model; alpha sets the memory (default
//   1/20: a step in speed is tracked within a few dozen steps).
// * K ranks (lookahead parallelism): a step of T plan tokens costs the slowest rank's part plus the collective
//   latency: f(ceil(T * imbalance / K)) + latency. `imbalance` (max part tokens / (T / K), >= 1: LADE columns
//   travel with the level-0 prefix they depend on, pending chains are re-fed) and `latency` are EWMAs of what
//   the LP executors measure. With K = 1 this is f(T). So the same model tells how large a plan K ranks run in
//   the time of one rank's: the controller sees cheaper big plans and grows them.
// * freeze() stops updates: tests force extreme shapes (flat, steep) that no timing can move.
// * The clock (CostClock) that times forwards and host work: wall time on a GPU (the host waits for the device)
//   or a multi-threaded CPU forward; the calling thread's CPU time for a CPU forward on one thread, so that a
//   forward preempted by another process on a shared machine is not costed as a slow forward (preemption costs
//   a one-token forward as much as an eight-token one and flattens the curve; the controller then drafts more
//   than pays). The set-up picks it (generate: cpu device and --threads 1 -> ThreadCpu).
#pragma once
#include <cstddef>
#include <vector>

namespace la {

enum class CostClock { Wall, ThreadCpu };
// Seconds on clock `c` from an arbitrary origin (differences only).
double cost_clock_seconds(CostClock c);
const char* cost_clock_name(CostClock c);

class ForwardCostModel {
 public:
  // Buckets 1, 2, 4, ... up to max_tokens (max_tokens itself included), every bucket at `seconds_each`.
  explicit ForwardCostModel(int max_tokens = 256, double seconds_each = 1e-3);
  const std::vector<int>& buckets() const { return buckets_; }
  // Sets a bucket's time (calibration, tests). `bucket` must be one of buckets().
  void set(int bucket, double seconds);
  // The stored time of bucket i (before the monotone floor).
  double bucket_seconds(size_t i) const { return secs_[i]; }
  // Predicted seconds of a forward of `tokens` (>= 1; fractional values interpolate).
  double seconds(double tokens) const;
  // A measured forward of `tokens` took `seconds`: moves the model toward it (unless frozen).
  void observe(int tokens, double seconds);
  void set_alpha(double a) { alpha_ = a; }
  void freeze(bool f = true) { frozen_ = f; }
  bool frozen() const { return frozen_; }
  long observations() const { return observations_; }

 private:
  std::vector<int> buckets_;
  std::vector<double> secs_;
  double alpha_ = 0.05;
  bool frozen_ = false;
  long observations_ = 0;
};

class StepCostModel {
 public:
  explicit StepCostModel(ForwardCostModel fwd = ForwardCostModel(), int ranks = 1, double latency_s = 0)
      : fwd_(std::move(fwd)), ranks_(ranks < 1 ? 1 : ranks), latency_s_(latency_s) {}
  ForwardCostModel& forward() { return fwd_; }
  const ForwardCostModel& forward() const { return fwd_; }
  int ranks() const { return ranks_; }
  void set_ranks(int k) { ranks_ = k < 1 ? 1 : k; }
  double latency_s() const { return latency_s_; }
  void set_latency(double s) { latency_s_ = s < 0 ? 0 : s; }
  double imbalance() const { return imbalance_; }
  // Predicted seconds of one step whose plan has `plan_tokens` tokens (root included), on ranks() ranks.
  double step_seconds(double plan_tokens) const;
  // Tokens in the slowest rank's part of such a plan.
  double part_tokens(double plan_tokens) const;
  // One replica's forward (executor side).
  void observe_forward(int tokens, double seconds) { fwd_.observe(tokens, seconds); }
  // LP executors: a step of `plan_tokens` whose largest part had `max_part_tokens`, and the time the step took
  // beyond its slowest forward (collectives).
  void observe_parts(int plan_tokens, int max_part_tokens);
  void observe_latency(double seconds);
  void freeze(bool f = true) { fwd_.freeze(f); frozen_ = f; }
  // The clock every observation is taken on (see the design notes above).
  CostClock clock() const { return clock_; }
  void set_clock(CostClock c) { clock_ = c; }
  double now() const { return cost_clock_seconds(clock_); }

 private:
  ForwardCostModel fwd_;
  int ranks_;
  double latency_s_;
  double imbalance_ = 1.0;
  bool frozen_ = false;
  CostClock clock_ = CostClock::Wall;
};

}  // namespace la
