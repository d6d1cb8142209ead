// Cost model of one step on the device at hand: seconds of a forward as a function of its step tokens T, and of
// a K-rank lookahead-parallel step. No libtorch, no devices: strategies never see this; the draft controller
// (draft_controller.h) asks it "what does a plan of T tokens cost" and nothing else.
//
// Design (why this shape):
// * Per-replica forward time f(T) is a table of every T = 1 .. max_tokens (256 at most), read linearly between
//   integers and beyond the end with the slope of the last two anchors; reads are floored by every smaller T (the
//   cost never decreases with T), so one noisy entry cannot make a larger plan look cheaper than a smaller one.
//   One entry per size, because the measured curves are staircases that a coarser grid averages away: the CPU
//   GEMM runs 4-row tiles, so a batch of 16 plus one draft row costs a new tile (SmolLM2 fp32, 2 threads: 16 -> 17
//   rows +10%, 17 -> 19 +2%), and the CUDA step program pads a step to its graph bucket (1, 8, 16, 32, ...), so
//   17 tokens cost what 32 do. With entries only at powers of two, read linearly, 17 rows were priced at f(16) plus
//   1/16 of f(32) - f(16), and a 17-row step's time was booked mostly against bucket 16: the plain step of a batch
//   of 16 looked dearer and its draft rows cheaper than they are, and drafting that lost 10% to plain decoding at
//   --batch 4 was booked as a 0.3% gain.
// * Calibration (cost_calibration.h) times the anchors (buckets(): 1, 2, 4, 8, ... and one past each power of two
//   from 4 to 64, where a batch's first draft row lands) and sets the sizes between them by linear interpolation.
//   After that every real forward (executor side: LocalExecutor, so every replica of a ParallelExecutor) feeds
//   observe(T, seconds): the entry of T moves toward the observation (an EWMA of the log ratio measured/predicted,
//   alpha), and its neighbours within 4 sizes by half as much per size away (so sizes not run lately follow the
//   ones beside them; the observed sizes still converge to their own times, the spread being a positive-definite
//   kernel). Not a scale shared by every size: calibration's errors depend on the size (it runs at a short
//   context), and a shared scale fitted on the sizes drafts run inflated the rest; with the monotone floor, the
//   plain step of --batch 8 was read at the cost of 16 rows and drafting lost 11%. Log-space and a clamped ratio
//   keep one stall of this shared machine (another process building) from wrecking the model; alpha sets the
//   memory (default 1/20: a step in speed is tracked within a few dozen steps).
// * K ranks (lookahead parallelism): a step of T plan tokens costs the slowest rank's part plus the collective
//   latency: f(ceil(T * imbalance / K)) + latency. `imbalance` (max part tokens / (T / K), >= 1: LADE columns
//   travel with the level-0 prefix they depend on, pending chains are re-fed) and `latency` are EWMAs of what
//   the LP executors measure. With K = 1 this is f(T). So the same model tells how large a plan K ranks run in
//   the time of one rank's: the controller sees cheaper big plans and grows them.
// * Rows that choose no next token (a prompt chunk's, a pending chain's: StepInput::first_output) skip the LM head
//   and the token choice. The table holds forwards whose every row chooses one (what a draft step is), and
//   output_row_seconds() is what the head adds to such a row (calibration times a forward with no output row):
//   a step with `silent` rows costs f(T) - silent * head. Observations are booked the same way (a silent row's
//   head added back), so prompt-chunk steps no longer teach the large sizes that rows are cheaper than a draft
//   row is: on SmolLM2 the head is ~21% of a row, on Gemma-3-270M (262k vocabulary) ~60%.
// * Context: a row's attention reads every position it attends, so a step's time grows with the context (SmolLM2
//   fp32, 2 threads, bench-forward: 4 rows at 200 committed tokens +6.7% over 64, 8 rows +15%). The table holds
//   forwards whose rows attend `reference_context` positions (calibration's), and a row attending c positions adds
//   (c - reference) * context_row_seconds (calibration times 16 rows again with 96 more positions cached: 3.5 us
//   a row and position on SmolLM2). Observations are booked back to the reference context, so each entry stays a
//   forward at that context and a size not run lately is read right at any context. Before, the observed sizes
//   drifted to the job's context while the others kept calibration's: the plain step of a batch whose every
//   request drafts was read ~6% low at 200 positions, and the controllers' ledger ("Measured rows") booked that as
//   drafting's loss on every drafted step (about 1.7 ms of a 30 ms step at --batch 4, more than the exploration
//   allowance refills), and the controller priced a draft row at long contexts by the sizes it last saw. The step
//   loop says which context the coming steps attend (StepCostModel::set_context: the root's position).
// * freeze() stops updates: tests force extreme shapes (flat, steep) that no timing can move.
// * The clock (CostClock) that times forwards and host work: wall time on a GPU (the host waits for the device)
//   or a multi-threaded CPU forward; the calling thread's CPU time for a CPU forward on one thread, so that a
//   forward preempted by another process on a shared machine is not costed as a slow forward (preemption costs
//   a one-token forward as much as an eight-token one and flattens the curve; the controller then drafts more
//   than pays). The set-up picks it (generate: cpu device and --threads 1 -> ThreadCpu).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace la {

enum class CostClock { Wall, ThreadCpu };
// Seconds on clock `c` from an arbitrary origin (differences only).
double cost_clock_seconds(CostClock c);
const char* cost_clock_name(CostClock c);

class ForwardCostModel {
 public:
  // Entries 1 .. max_tokens, every one at `seconds_each`; anchors (buckets()) 1, 2, 4, ..., max_tokens and 5, 9,
  // 17, 33, 65 below it.
  explicit ForwardCostModel(int max_tokens = 256, double seconds_each = 1e-3);
  // The sizes calibration times (increasing; max_tokens last).
  const std::vector<int>& buckets() const { return buckets_; }
  int max_tokens() const { return static_cast<int>(secs_.size()); }
  // Sets the time of `tokens` (1 .. max_tokens; calibration, tests) and makes it an anchor: the sizes between
  // anchors are re-interpolated (linearly; past the last anchor: its value).
  void set(int tokens, double seconds);
  // The stored time of bucket i (before the monotone floor).
  double bucket_seconds(size_t i) const { return secs_[buckets_[i] - 1]; }
  // Predicted seconds of a forward of `tokens` (>= 1; fractional values interpolate).
  double seconds(double tokens) const;
  // A measured forward of `tokens` took `seconds`: moves the model toward it (unless frozen).
  void observe(int tokens, double seconds);
  // What the LM head and token choice add to a forward per row that chooses a next token (>= 0; 0: unknown,
  // every row priced as an output row).
  void set_output_row_seconds(double s);
  double output_row_seconds() const { return head_s_; }
  // Rows attend `reference` positions in the table; each position more (or fewer) costs `row_seconds` a row
  // (>= 0; reference 0: not measured, no context term).
  void set_context_cost(double reference, double row_seconds);
  double reference_context() const { return ref_ctx_; }
  double context_row_seconds() const { return ctx_row_s_; }
  void set_alpha(double a) { alpha_ = a; }
  void freeze(bool f = true) { frozen_ = f; }
  bool frozen() const { return frozen_; }
  long observations() const { return observations_; }

 private:
  void refill();  // the non-anchors between anchors, and the running max
  std::vector<int> buckets_;
  std::vector<double> secs_;     // entry t - 1: seconds of t tokens
  std::vector<double> floor_;    // entry t - 1: max of secs_ up to it
  std::vector<uint8_t> anchor_;  // set() or observed: never re-interpolated
  static constexpr int kSpread = 4;  // neighbours an observation moves (by 2^-distance of its step)
  double head_s_ = 0;
  double ref_ctx_ = 0, ctx_row_s_ = 0;
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
  // The mean position the coming steps' rows attend (the step loop sets it before it plans; < 0: the table's
  // reference context).
  void set_context(double mean_position) { ctx_ = mean_position; }
  double context() const { return ctx_; }
  // Predicted seconds of one step whose plan has `plan_tokens` tokens (root included), on ranks() ranks, of which
  // `silent_rows` choose no next token (prompt chunks: no LM head), its rows attending `context` positions on
  // average (< 0: context()).
  double step_seconds(double plan_tokens, double silent_rows = 0, double context = -1) const;
  // Tokens in the slowest rank's part of such a plan.
  double part_tokens(double plan_tokens) const;
  // One replica's forward of `tokens` rows, `silent_rows` of them without an output (executor side), its rows
  // attending `context` positions on average (< 0: context()).
  void observe_forward(int tokens, double seconds, int silent_rows = 0, double context = -1);
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
  // What rows attending `context` positions (< 0: ctx_) add to `tokens` rows at the reference context (may be < 0).
  double context_seconds(double tokens, double context) const;
  double imbalance_ = 1.0;
  double ctx_ = -1;
  bool frozen_ = false;
  CostClock clock_ = CostClock::Wall;
};

}  // namespace la
