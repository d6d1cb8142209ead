// The generation loop: strategy -> plan -> executor (one forward) -> one verifier -> commit. No libtorch.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lookahead/decode/draft_controller.h"
#include "lookahead/decode/executor.h"
#include "lookahead/decode/strategy.h"
#include "lookahead/model/config.h"

namespace la {

struct GenParams {
  int max_new_tokens = 128;  // 0: up to the context limit
  SampleParams sample;
  // Cancellation (clean stop on SIGINT/SIGTERM): read with one relaxed load before every step; once true the
  // request ends after the step in flight with finish_reason "cancelled" (strategy and executor are ended as
  // usual, so their state stays consistent). nullptr: never.
  const std::atomic<bool>* cancel = nullptr;
};

struct RequestStats {
  int prompt_tokens = 0;
  int new_tokens = 0;
  int steps = 0;                 // forward passes after the prefill
  int64_t draft_tokens = 0;      // verify nodes planned (root excluded), summed over steps
  int64_t lookahead_tokens = 0;  // non-verify nodes planned, summed over steps
  int64_t step_tokens = 0;       // plan nodes (root included), summed over steps
  std::vector<int64_t> accept_hist;  // accept_hist[k]: steps that produced k new tokens
  double seconds = 0, prefill_s = 0, draft_s = 0, forward_s = 0, verify_s = 0, commit_s = 0;
  // CPU time of the calling thread while decoding (prefill excluded). With one compute thread (--threads 1) it
  // is the decode time without the time other processes took the core: benchmarks on a shared machine use it.
  double cpu_s = 0;
    std::string finish_reason;     // eos | length | cancelled
  bool adaptive = false;         // a DraftController chose the draft budgets
  AdaptiveCounters budgets;      // adaptive: chosen budgets (histogram), plain fallbacks, probes
  double compression() const { return steps ? double(new_tokens) / steps : 0.0; }
  double mean_accepted() const;  // mean draft tokens accepted per step (new tokens per step minus one)
  double tokens_per_s() const { return seconds > 0 ? new_tokens / seconds : 0.0; }
  void add(const RequestStats& o);
};

struct GenResult {
  std::vector<int32_t> ids;  // generated ids, the eos that ended generation included
  RequestStats stats;
};

class Generator {
 public:
  Generator(StepExecutor& exec, Strategy& strategy, const ModelConfig& cfg)
      : exec_(exec), strategy_(strategy), cfg_(cfg) {}
  // Throws la::Error if the prompt does not fit the model's context with the requested new tokens.
  GenResult generate(const std::vector<int32_t>& prompt, const GenParams& gp,
                     const std::function<void(const std::vector<int32_t>&)>& on_tokens = {});
  // Replaces the verifier (tests use a deliberately wrong one to show the sampling test can fail).
  void set_verifier(std::function<Verdict(const StepPlan&, const std::vector<int32_t>&)> v) { verifier_ = std::move(v); }
  // Adaptive drafting: the controller chooses each step's draft budget (nullptr: the fixed parameters). It must
  // drive this generator's strategy and outlive the generator's use.
  void set_controller(DraftController* c) { controller_ = c; }

 private:
  StepExecutor& exec_;
  Strategy& strategy_;
  const ModelConfig& cfg_;
  std::function<Verdict(const StepPlan&, const std::vector<int32_t>&)> verifier_;
  DraftController* controller_ = nullptr;
};

// Checks that a prompt and a new-token budget fit the context; throws a clear la::Error otherwise.
void check_fits(const ModelConfig& cfg, size_t prompt_tokens, int max_new_tokens);

}  // namespace la
