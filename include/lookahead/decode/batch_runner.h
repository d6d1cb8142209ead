// Continuous batching: many requests in flight, every step ONE forward over the rows of all of them. No libtorch.
//
// Each request occupies a slot: a replica of the model with its own KV cache (slot 0 the loaded model, slot i a
// fork() sharing its weights), a LocalExecutor, a strategy (slot 0 the run's strategy, slot i its spawn(i),
// sharing the global draft state: trie, suffix tree, pools) and a StepRunner. One step of the batch:
//
//   every slot still prefilling stages a chunk of its prompt (a chain; at most --prefill-chunk tokens)
//   every decoding slot runs StepRunner::plan_step() (its controller chooses its budget, its strategy plans)
//   -> StepModel::forward_batch over all staged inputs (one forward: the CPU kernels run all rows together)
//   -> prefilling slots commit their chunk; decoding slots run StepRunner::finish_step() (verify, update,
//      append, commit, observe)
//
// So a request joins as soon as a slot frees, and its prompt is fed in chunks between the others' decode steps
// instead of stalling them. Exactness: each slot's step is the step it would run alone, and forward_batch gives
// every item the results of its own forward (batch-invariant kernels), so every request's tokens are those of
// decoding it alone (greedy: plain decoding; sampling: position-keyed per request stream).
//
// One draft budget per step, shared: with adaptive drafting every slot's controller sees the rows and expected
// tokens of the rest of the step (DraftController::set_batch), so a request drafts only where its expected extra
// tokens beat the marginal cost of its rows at the current batch size: generous with few requests in flight, lean
// when the step is compute-bound, and the requests whose drafts are accepted get the rows. The slots' controllers
// share one ledger (DraftLedger): what drafting may lose to batched plain decoding is bounded for the batch as a
// whole, not once per slot. Above the controllers, the batch caps every request's budget (DraftCap, draft_cap.h):
// the cap whose steps returned the most tokens per second, measured, so the step as a whole is not left to the
// slots' best replies to each other.
//
// Under lookahead parallelism (`replicas`, a SlotExecutor: ParallelExecutor over K replicas) the slots live on the
// replica group instead: every replica holds every slot's cache, each decoding slot's plan is split across the
// replicas, and the step's forward is one group round (each replica one forward over its share of every slot).
// Everything above the forward (planning, budgets, verification, commits) is the same code.
//
// KV memory: each admitted request reserves the cache rows it can need (prompt + new tokens + the largest step)
// out of `kv_rows`; a request that does not fit waits for a slot to free rows, one that could never fit is
// refused (fits_ever()). Each slot's cache is resized to its reservation at admission (StepModel::reserve_cache),
// so steps allocate nothing.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/decode/cost_model.h"
#include "lookahead/decode/draft_cap.h"
#include "lookahead/decode/draft_controller.h"
#include "lookahead/decode/executor.h"
#include "lookahead/decode/step_runner.h"
#include "lookahead/decode/strategy.h"
#include "lookahead/model/step_model.h"

namespace la {

struct BatchOptions {
  int slots = 1;            // --batch: requests in flight at most
  int prefill_chunk = 256;  // --prefill-chunk: prompt tokens a joining request feeds per step
  int64_t kv_rows = 0;      // KV cache rows all slots may reserve together (0: slots x the model's context)
  bool draft_cap = true;    // --draft-cap: with adaptive drafting, the batch caps every request's budget (DraftCap)
};

// Budget use over the run (the summary's "budget" line).
struct BatchCounters {
  int64_t steps = 0;         // batched forwards
  int64_t rows = 0;          // step rows over all forwards
  int64_t draft_rows = 0;    // plan draft + lookahead nodes among them
  int64_t prefill_rows = 0;  // prompt chunk rows among them
  int64_t slot_steps = 0;    // decode steps of requests (sum over forwards of decoding slots)
  int64_t max_active = 0;    // most requests in flight at once
  double forward_s = 0;      // wall seconds inside the batched forwards (under LP: rank 0's, collectives included)
  double draft_gain_s = 0;   // the slots' shared ledger (DraftLedger): drafting's gain over batched plain steps ...
  double draft_paid_s = 0;   // ... and all steps' predicted seconds (0, 0: no adaptive drafting)
  std::vector<std::string> cap_labels; // the batch's draft caps (DraftCap; the last: none) by name ("=1", "=2" exact, "4") ...
  std::vector<int64_t> cap_steps;      // ... and the steps run under each (steps of one deciding request: none)
};

class BatchRunner {
 public:
  // `model`, `strategy`, `cfg` and `cost` (may be null: no adaptive drafting) must outlive the runner.
  // `make_controller`: builds a slot's controller for its strategy (null: fixed drafts). `replicas` (may be null:
  // the slots are forks of `model` here): the slots over a replica group (lookahead parallelism); it must outlive
  // the runner, and `model` is then only the configuration's source.
  BatchRunner(StepModel& model, Strategy& strategy, const ModelConfig& cfg, const BatchOptions& opt,
              StepCostModel* cost,
              std::function<std::unique_ptr<DraftController>(Strategy&)> make_controller = nullptr,
              SlotExecutor* replicas = nullptr);
  ~BatchRunner();

  int slots() const { return static_cast<int>(slots_.size()); }
  int active() const { return active_; }
  bool has_free_slot() const { return active_ < slots(); }
  // Cache rows a request of this prompt length and new-token limit reserves.
  int64_t rows_needed(int prompt_len, int max_new) const;
  bool fits_now(int prompt_len, int max_new) const;
  bool fits_ever(int prompt_len, int max_new) const { return rows_needed(prompt_len, max_new) <= opt_.kv_rows; }
  int64_t kv_rows() const { return opt_.kv_rows; }

  // Admits a request into a free slot (fits_now must hold); `tag` is the caller's id for it. Returns the slot.
  int add(int64_t tag, const std::vector<int32_t>& prompt, const SampleParams& sp, const StepLimits& limits);
  // One batched step over every active slot (at least one). Slots whose request ended are listed in finished().
  void step();
  const std::vector<int>& finished() const { return finished_; }
  // The request in `slot` ended (finished or cancelled): its runner ends, its rows are freed.
  void release(int slot);

  int64_t tag(int slot) const;
  bool busy(int slot) const;
  bool prefilling(int slot) const;
  StepRunner& runner(int slot);
  const BatchCounters& counters() const { return counters_; }
  // Adaptive counters of every slot, summed.
  AdaptiveCounters adaptive_counters() const;
  // Every opened slot's strategy counters (Strategy::counters), slot 0 first: per-request state is per slot, and
  // what the slots share (trie, suffix tree, pools) reads the same in each.
  std::vector<std::map<std::string, double>> slot_counters() const;

 private:
  struct Slot;
  Slot& open_slot(int i);
  int stage_chunk(Slot& s, int i);
  int stage_plan(Slot& s, int i);

  StepModel& model_;
  Strategy& strategy_;
  const ModelConfig& cfg_;
  BatchOptions opt_;
  StepCostModel* cost_;
  std::function<std::unique_ptr<DraftController>(Strategy&)> make_controller_;
  SlotExecutor* replicas_ = nullptr;
  DraftLedger ledger_;     // shared by every slot's controller
  std::unique_ptr<DraftCap> cap_;  // the batch's draft cap (adaptive drafting, --batch >= 2)
  int max_step_rows_ = 1;  // the largest step one request can stage
  std::vector<std::unique_ptr<Slot>> slots_;
  int active_ = 0;
  int64_t reserved_ = 0;
  std::vector<BatchItem> items_;  // the step's forward items, reused
  std::vector<int> staged_;       // slot of each item
  std::vector<int> finished_;
  BatchCounters counters_;
};

}  // namespace la
