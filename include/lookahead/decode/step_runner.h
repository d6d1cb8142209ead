// One decoding step, the only copy of it: generation (Generator), Ouroboros' draft model and the strategy tests
// all call StepRunner::step():
//
//   [controller: choose budget] -> strategy.plan -> validate -> executor.run (one forward) -> verify
//   -> strategy.update (sees the sequence before the new tokens) -> append (cut at eos / stop sequence / length)
//   -> executor.commit -> [controller: observe] -> stats
//
// The runner owns the sequence and every per-step buffer (plan, results, verdict, commit path); they keep their
// capacity across steps and requests, so a step allocates nothing once they have held the largest step.
// No libtorch.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lookahead/decode/draft_controller.h"
#include "lookahead/decode/executor.h"
#include "lookahead/decode/strategy.h"
#include "lookahead/model/config.h"

namespace la {

struct RequestStats {
  int prompt_tokens = 0;
  int new_tokens = 0;
  int steps = 0;                 // forward passes after the prefill
  int64_t draft_tokens = 0;      // draft nodes planned (root excluded), summed over steps
  int64_t lookahead_tokens = 0;  // non-draft nodes planned, summed over steps
  int64_t step_tokens = 0;       // plan nodes (root included), summed over steps
  std::vector<int64_t> accept_hist;  // accept_hist[k]: steps that produced k new tokens
  double seconds = 0, prefill_s = 0, draft_s = 0, forward_s = 0, verify_s = 0, commit_s = 0;
  // CPU time of the calling thread while decoding (prefill excluded). With one compute thread (--threads 1) it
  // is the decode time without the time other processes took the core: benchmarks on a shared machine use it.
  double cpu_s = 0;
  std::string finish_reason;     // eos | stop | length | cancelled
  bool adaptive = false;         // a DraftController chose the draft budgets
  AdaptiveCounters budgets;      // adaptive: chosen budgets (histogram), plain fallbacks, probes
  double compression() const { return steps ? double(new_tokens) / steps : 0.0; }
  double mean_accepted() const;  // mean draft tokens accepted per step (new tokens per step minus one)
  double tokens_per_s() const { return seconds > 0 ? new_tokens / seconds : 0.0; }
  void add(const RequestStats& o);
};

// Stop sequences (generate --stop, a record's "stop"): shown each output token as the runner appends it, says
// when the output's text first contains one. The request then ends at that token ("stop"), and the tokens verified
// after it in the same step are dropped, as after an eos: the ids are plain decoding's up to that token, whatever
// the drafts. Text needs the tokenizer, so the CLI implements it (src/cli/stop_sequences.h); the runner sees ids.
class StopSequences {
 public:
  virtual ~StopSequences() = default;
  virtual bool append(int32_t token) = 0;  // true: the output now contains a stop sequence
};

struct StepLimits {
  int max_positions = 0;    // the context: no plan node at position max_positions or beyond
  int max_new = -1;         // tokens after the prompt, then the request ends ("length"); < 0: no limit
  bool stop_at_eos = true;  // an eos token ends the request ("eos"); tokens verified after it are dropped
  StopSequences* stop = nullptr;  // not owned, outlives the request; null: none
};

using Verifier = std::function<Verdict(const StepPlan&, const std::vector<int32_t>&)>;

class StepRunner {
 public:
  // `exec` and `strategy` must outlive the runner; `cfg` gives the eos ids. Every buffer of a step, the runner's
  // and the executor's, is sized here for the strategy's largest step (max_step_rows), so that no step allocates
  // when the request first drafts larger (a batch's cap or the controller changes budgets mid-request).
  StepRunner(StepExecutor& exec, Strategy& strategy, const ModelConfig& cfg);
  // The most rows one step of `strategy` feeds: the pending root, the largest budget and its lookahead nodes.
  static int max_step_rows(const Strategy& strategy);
  // A request starts: prefill (executor), strategy.begin_request, fresh stats. done() at once if max_new == 0.
  void begin(const std::vector<int32_t>& prompt, const SampleParams& sp, const StepLimits& limits);
  // Runs one step (the request must not be done()); returns the number of tokens appended to seq().
  int step();
  // The same step in phases, for the batch loop (batch_runner.h) that runs many requests' forwards as one:
  // begin_state() is begin() without the executor's part (the caller began its executor), plan_step() chooses
  // the budget and plans, the caller fills results() for the plan (the forward), finish_step() verifies,
  // updates, appends, commits and observes. step() is plan_step(), exec.run(), finish_step(): one pipeline.
  void begin_state(const std::vector<int32_t>& prompt, const StepLimits& limits);
  void plan_step();
  int finish_step();
  std::vector<int32_t>& results_buffer() { return results_; }
  // The request ends: strategy.end_request(seq()) and executor.end().
  void end();

  bool done() const { return done_; }
  // The sequence (prompt + generated). Ouroboros rolls its draft back by assigning to it (and truncating the
  // draft model's cache) between steps; the executor re-feeds whatever the cache lacks.
  std::vector<int32_t>& seq() { return seq_; }
  const std::vector<int32_t>& seq() const { return seq_; }
  int generated() const { return static_cast<int>(seq_.size()) - prompt_len_; }
  RequestStats& stats() { return stats_; }
  // The last step, for tests and observers: its plan, the results of every node, the verdict (before the
  // eos/length cut) and the depth bound the plan was made under.
  const StepPlan& plan() const { return plan_; }
  const std::vector<int32_t>& results() const { return results_; }
  const Verdict& verdict() const { return verdict_; }
  int max_depth() const { return max_depth_; }

  // Replaces the verifier (tests use a deliberately wrong one to show the sampling test can fail).
  void set_verifier(Verifier v) { verifier_ = std::move(v); }
  // Adaptive drafting: the controller chooses each step's budget (nullptr: the strategy's fixed parameters).
  void set_controller(DraftController* c) { controller_ = c; }

 private:
  void reserve_step(int nodes);  // the step's buffers (plan, results, verdict) for plans of up to `nodes` nodes
  void note_sleeps();            // the controller's new sleeps into the request's stats
  StepExecutor& exec_;
  Strategy& strategy_;
  const ModelConfig& cfg_;
  Verifier verifier_;
  DraftController* controller_ = nullptr;
  StepLimits limits_;
  int prompt_len_ = 0;
  int max_depth_ = 0;
  bool done_ = true;
  RequestStats stats_;
  std::vector<int32_t> seq_;
  StepPlan plan_;
  std::vector<int32_t> results_;
  Verdict verdict_;
  std::vector<int32_t> path_;  // the accepted path cut to the tokens kept
  std::chrono::steady_clock::time_point t0_, t1_;  // the step's start and the end of its planning
  double h0_ = 0, h1_ = 0, h2_ = 0;                // the same on the cost model's clock (+ the forward's end)
  bool timed_ = false;  // step(): this runner timed the forward itself (not a batch), so h2_ - h1_ is it
  bool asleep_ = false;  // this step ran without the strategy (the controller's dormancy)
  int64_t sleeps_seen_ = 0;  // the controller's sleeps counted into stats_ so far
};

}  // namespace la
