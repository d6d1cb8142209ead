// A decoding strategy turns its draft state into one StepPlan per step and reads back the verified result.
// Strategies never see tensors, attention or ranks.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/decode/step_plan.h"

namespace la {

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  // A new request starts; `prompt` is the prompt's token ids (BOS included).
  virtual void begin_request(const std::vector<int32_t>& prompt) { (void)prompt; }
  // Builds the plan for the next step. `seq` is the whole sequence so far (prompt + generated); the root is
  // seq.back(). `max_depth` bounds node depth (context limit); deeper nodes must not be planned.
  virtual void plan(const std::vector<int32_t>& seq, int max_depth, StepPlan& out) = 0;
  // The step's outcome: results[i] is the model's next token after node i; `verdict` the accepted path.
  // `seq` is the sequence before the new tokens were appended.
  virtual void update(const std::vector<int32_t>& seq, const StepPlan& plan, const std::vector<int32_t>& results,
                      const Verdict& verdict) = 0;
  // The request ended with `seq` (prompt + generated).
  virtual void end_request(const std::vector<int32_t>& seq) { (void)seq; }
  // Process exit: persist state if configured.
  virtual void shutdown() {}
  // Strategy-specific counters for stats (e.g. pool size).
  virtual std::map<std::string, double> counters() const { return {}; }
};

}  // namespace la
