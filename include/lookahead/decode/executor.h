// Executes step plans on model replicas. Strategies and the generation loop only see this interface, so they do
// not know how many ranks there are.
#pragma once
#include <cstdint>
#include <vector>

#include "lookahead/decode/cost_model.h"
#include "lookahead/decode/step_plan.h"
#include "lookahead/model/step_model.h"

namespace la {

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // A request starts: the prompt (BOS included, at least one token) and the sampling parameters.
  virtual void begin(const std::vector<int32_t>& prompt, const SampleParams& sp) = 0;
  // Runs one plan whose root is seq.back() at position seq.size()-1; `results` is resized to plan.size() and
  // receives the result of every plan node (the caller owns the buffer and reuses it: no allocation per step).
  virtual void run(const std::vector<int32_t>& seq, const StepPlan& plan, std::vector<int32_t>& results) = 0;
  // After verification: `seq` now holds the appended tokens; `path` is the accepted path of the last plan (root
  // first) cut to the nodes whose tokens were kept (the nodes path[1..] are seq's tokens after the old root).
  virtual void commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) = 0;
  // The request ended (outputs are final).
  virtual void end() = 0;
  // Adaptive drafting: after run(), the step runner (the only one that feeds the cost model) passes the run's
  // time on the cost model's clock; the executor says what ran: the forward of its step tokens, and on LP
  // executors each part's forward, the part imbalance and the collective latency.
  virtual void observe_cost(StepCostModel& cost, double run_seconds) const { (void)cost, (void)run_seconds; }
  // Sizes the buffers of steps of up to `rows` input rows once (the step runner, when it is made: its strategy's
  // largest step), so that no step allocates when a plan first grows. Executors without such buffers ignore it.
  virtual void reserve_step(int rows) { (void)rows; }
};

// Batched steps over a replica group (lookahead parallelism with --batch, BatchRunner): every replica holds a KV
// cache per batch slot; one batched step stages every slot's prompt chunk or plan, runs them as one round (each
// replica one forward over all its slots' parts) and hands each decoding slot its merged results. Implemented by
// ParallelExecutor (parallel_executor.h); the batch runner sees no ranks, only slots.
class SlotExecutor {
 public:
  virtual ~SlotExecutor() = default;
  // A request starts in `slot` (its prompt is fed later by chunks or as its first step's pending chain); every
  // replica sizes that slot's cache for `rows` rows.
  virtual void begin_slot(int slot, const std::vector<int32_t>& prompt, const SampleParams& sp, int rows) = 0;
  // Prompt tokens of `seq` not yet in the slot's caches (the root excluded).
  virtual int prefill_left(int slot, const std::vector<int32_t>& seq) const = 0;
  // Stages the next min(max_tokens, prefill_left) prompt tokens of the slot (every replica runs them); returns
  // the rows staged.
  virtual int stage_chunk(int slot, const std::vector<int32_t>& seq, int max_tokens) = 0;
  // Stages the slot's plan (split across the replicas); returns the rows of the largest replica's share.
  virtual int stage_plan(int slot, const std::vector<int32_t>& seq, const StepPlan& plan) = 0;
  // Runs everything staged as one round; staged prompt chunks are committed.
  virtual void run_staged() = 0;
  // The merged result of every node of the slot's staged plan (the caller's buffer, reused).
  virtual void collect_slot(int slot, std::vector<int32_t>& results) = 0;
  // As StepExecutor::commit, for the slot's last plan.
  virtual void commit_slot(int slot, const std::vector<int32_t>& seq, const std::vector<int32_t>& path) = 0;
  // The slot's request ended.
  virtual void end_slot(int slot) = 0;
  // Sizes the buffers of batched steps of up to `slots` items whose plans hold up to `plan_nodes` nodes, once, so
  // that no step allocates when a plan first grows (a batch's draft cap changes budgets mid-request).
  virtual void reserve_steps(int slots, int plan_nodes) {
    (void)slots;
    (void)plan_nodes;
  }
};

// One replica in this process. The cache holds seq[0, L); the "pending" tokens seq[L, size) (at least the root)
// are re-fed as a chain in front of the plan, so a replica that computed only a part of a plan (lookahead
// parallelism) or none of the accepted path still ends with the right cache.
class LocalExecutor : public StepExecutor {
 public:
  explicit LocalExecutor(StepModel& model) : model_(model) {}
  void begin(const std::vector<int32_t>& prompt, const SampleParams& sp) override;
  void run(const std::vector<int32_t>& seq, const StepPlan& plan, std::vector<int32_t>& results) override;
  // `path` holds indices into the last plan run here; the longest prefix of path[1..] present is committed
  // (all of it when this replica ran the whole plan), together with the pending chain.
  void commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) override;
  void end() override {}
  void observe_cost(StepCostModel& cost, double run_seconds) const override;

  // ---- Batched steps (batch_runner.h): the same step split around a forward the caller runs for many replicas.
  // begin() without the prefill: the prompt (all but its last token) is fed later, by prefill chunks or as the
  // first step's pending chain.
  void begin_deferred(const std::vector<int32_t>& prompt, const SampleParams& sp);
  // Prompt tokens not yet in the cache (the root excluded).
  int prefill_left(const std::vector<int32_t>& seq) const;
  // A chain of the next min(max_tokens, prefill_left) prompt tokens, to be run and then committed whole by
  // commit_prefill().
  const StepInput& stage_prefill(const std::vector<int32_t>& seq, int max_tokens);
  void commit_prefill();
  // run() in two halves: the step's input (pending chain + plan), then, given the forward's results for it,
  // every plan node's result.
  const StepInput& stage(const std::vector<int32_t>& seq, const StepPlan& plan);
  void collect(const std::vector<int32_t>& out, std::vector<int32_t>& results) const;
  const SampleParams& sample_params() const { return sp_; }
  // Sizes the step's input, results and commit buffers for steps of up to `rows` rows once (no step allocates
  // when the request first drafts larger).
  void reserve_step(int rows) override;
  const StepInput& staged_input() const { return in_; }  // the last stage / stage_prefill
  std::vector<int32_t>& forward_out() { return out_; }  // a buffer for the batch's results of this replica
  // Number of step tokens of the last forward (pending chain + plan nodes).
  int last_step_tokens() const { return last_tokens_; }
  StepModel& model() { return model_; }

 private:
  StepModel& model_;
  SampleParams sp_;
  StepInput in_;              // the step's input, reused (capacity kept) across steps
  std::vector<int32_t> out_;  // the forward's results (run, and this replica's item in batched steps), reused
  std::vector<int32_t> idx_;  // commit indices, reused
  int pending_ = 0;      // pending chain length in the last forward (root included)
  int plan_nodes_ = 0;   // plan size of the last forward
  int last_tokens_ = 0;
};

}  // namespace la
