// A decoding strategy turns its draft state into one StepPlan per step and reads back the verified result.
// Strategies never see tensors, attention or ranks.
#pragma once
#include <cstddef>
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
  // seq.back(). `max_depth` bounds node depth (the context limit, and the tokens the request may still make: a
  // step keeps at most max_depth + 1); deeper nodes must not be planned.
  virtual void plan(const std::vector<int32_t>& seq, int max_depth, StepPlan& out) = 0;
  // The step's outcome: results[i] is the model's next token after node i; `verdict` the accepted path.
  // `seq` is the sequence before the new tokens were appended.
  virtual void update(const std::vector<int32_t>& seq, const StepPlan& plan, const std::vector<int32_t>& results,
                      const Verdict& verdict) = 0;
  // The request ended with `seq` (prompt + generated).
  virtual void end_request(const std::vector<int32_t>& seq) { (void)seq; }
  // A request decoded elsewhere (another group of a multi-rank job, --lp-size) ended with `seq`, its first
  // `prompt_len` tokens the prompt: add its output to the global draft state as end_request() adds this strategy's
  // own, leaving the request in flight alone (called between steps). Drafts only: outputs never change.
  virtual void learn(const std::vector<int32_t>& seq, size_t prompt_len) { (void)seq, (void)prompt_len; }
  // Persists the draft state if a state file is configured (--trie-state, --pool-state, --suffix-state) and it
  // changed since the last write; atomic (state_checkpoint.h). The driver calls it after every finished request,
  // on a stop signal and at the end: a killed job loses at most the request in flight.
  virtual void checkpoint() {}
  // A strategy for another request decoded at the same time (a batch: decode/batch_runner.h). It has its own
  // per-request state (LADE's window, the request's suffix tree, prompt lookup's index) and shares this one's
  // global state (the trie, the global suffix tree, the n-gram and phrase pools), so every request of the batch
  // drafts from, and teaches, one state; checkpoint() on any of them saves it. `slot` seeds its randomness.
  // nullptr: the strategy cannot serve a batch.
  virtual std::unique_ptr<Strategy> spawn(int slot) { (void)slot; return nullptr; }
  // Strategy-specific counters for stats (e.g. pool size).
  virtual std::map<std::string, double> counters() const { return {}; }

  // ---- Adaptive drafting (draft_controller.h) ----
  // The draft budget is the most draft nodes, root excluded, the next plan() may hold. Contract: a plan
  // at budget b keeps the first b draft nodes (in index order) of the plan the strategy would make at any larger
  // budget from the same state, so one verified step tells what every smaller budget would have accepted.
  // Budget < 0 (the default, --adaptive off): the fixed parameters. The budget never changes what is accepted,
  // only what is proposed: outputs stay those of plain decoding.
  // max_draft_budget(): the budget the fixed parameters allow (0: never drafts, e.g. ar).
  virtual int max_draft_budget() const { return 0; }
  // The budgets the controller chooses among (0 and max_draft_budget() included, increasing).
  virtual std::vector<int> draft_ladder() const { return geometric_ladder(max_draft_budget()); }
  // Non-verify (lookahead) nodes a plan at this budget adds (LADE's window); they cost but never yield.
  virtual int lookahead_nodes(int budget) const { (void)budget; return 0; }
  // What the strategy sees of the coming step before planning it, as a class in [0, draft_contexts()) (prompt
  // lookup: the length of the suffix that matched; LADE: how many n-grams the pool holds for the root). The
  // acceptance statistics are kept per class, so a step with a long match can draft while one without does not.
  virtual int draft_contexts() const { return 1; }
  // `max_depth` is the coming plan()'s.
  virtual int draft_context(const std::vector<int32_t>& seq, int max_depth) { (void)seq, (void)max_depth; return 0; }
  // After draft_context(): the verify nodes the coming plan holds at an unlimited budget, when the strategy
  // knows it before planning (suffix: its draft tree; prompt lookup: the matched continuation), or -1. The
  // controller then costs each budget b at exactly min(b, hint) nodes, instead of assuming an unplanned budget
  // fills: budgets at or above the hint make the same plan.
  virtual int draft_size_hint() const { return -1; }
  // What a context class stands for, for the stats (e.g. "match 3"): budgets are reported per class.
  virtual std::string draft_context_label(int context) const { return std::to_string(context); }
  void set_draft_budget(int budget) { budget_ = budget; }
  int draft_budget() const { return budget_; }

  // 0, 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (powers of two and their 1.5x) up to max_budget, which is included;
  // every value a multiple of `unit` (LADE: n-gram chains of N-1 tokens).
  static std::vector<int> geometric_ladder(int max_budget, int unit = 1);

 protected:
  // The budget for a strategy whose fixed parameters allow `fixed` draft nodes.
  int budget_or(int fixed) const { return budget_ < 0 ? fixed : (budget_ < fixed ? budget_ : fixed); }

 private:
  int budget_ = -1;
};

}  // namespace la
