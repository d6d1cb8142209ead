// Generation: a request through StepRunner (step_runner.h: plan -> forward -> verify -> update -> commit), with
// cancellation, streaming and timing around it. No libtorch.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lookahead/decode/draft_controller.h"
#include "lookahead/decode/executor.h"
#include "lookahead/decode/step_runner.h"
#include "lookahead/decode/strategy.h"
#include "lookahead/model/config.h"

namespace la {

struct GenParams {
  int max_new_tokens = 128;  // 0: up to the context limit
  SampleParams sample;
  StopSequences* stop = nullptr;  // stop sequences of the request (step_runner.h); null: none
  // Cancellation (clean stop on SIGINT/SIGTERM): read with one relaxed load before every step; once true the
  // request ends after the step in flight with finish_reason "cancelled" (strategy and executor are ended as
  // usual, so their state stays consistent). nullptr: never.
  const std::atomic<bool>* cancel = nullptr;
};

struct GenResult {
  std::vector<int32_t> ids;  // generated ids, the eos that ended generation included
  RequestStats stats;
};

class Generator {
 public:
  Generator(StepExecutor& exec, Strategy& strategy, const ModelConfig& cfg)
      : cfg_(cfg), runner_(exec, strategy, cfg) {}
  // Throws la::Error if the prompt does not fit the model's context with the requested new tokens.
  GenResult generate(const std::vector<int32_t>& prompt, const GenParams& gp,
                     const std::function<void(const std::vector<int32_t>&)>& on_tokens = {});
  // Replaces the verifier (tests use a deliberately wrong one to show the sampling test can fail).
  void set_verifier(Verifier v) { runner_.set_verifier(std::move(v)); }
  // Adaptive drafting: the controller chooses each step's draft budget (nullptr: the fixed parameters). It must
  // drive this generator's strategy and outlive the generator's use.
  void set_controller(DraftController* c) { runner_.set_controller(c); }

 private:
  const ModelConfig& cfg_;
  StepRunner runner_;  // its buffers live as long as the generator: requests after the first allocate per request only
};

// Checks that a prompt and a new-token budget fit the context; throws a clear la::Error otherwise.
void check_fits(const ModelConfig& cfg, size_t prompt_tokens, int max_new_tokens);
// check_fits, and every prompt id inside the vocabulary.
void check_prompt(const ModelConfig& cfg, const std::vector<int32_t>& prompt, int max_new_tokens);

}  // namespace la
