// Adaptive drafting: each step, the draft budget that maximises expected tokens per second. No libtorch.
//
//   score(b) = (1 + E[accepted | b]) / (cost(1 + E[nodes | b] + lookahead(b)) + host(b))
//
// E[accepted | b], E[nodes | b]: the strategy's AcceptanceModel (counterfactual statistics, every smaller budget
// learned from every step). cost(T): the StepCostModel of the executor (forward of T plan tokens, on K ranks the
// slowest part + collective latency). host(b): measured host time of steps planned at b (drafting, verification,
// commit: Ouroboros' draft model lives here), an EWMA per level, borrowed from the nearest level below when a
// level has not run yet. Budget 0 is a plain step (score 1 / cost(1)).
//
// Choice: the level with the best score; a larger level within `prefer_larger` of the best wins (it also measures
// every level below it), but a draft that costs more than a plain step must beat it by `min_gain` (3%): the
// estimates are noisy and a plain step is the safe default. Exploration, so that a strategy that starts paying again is noticed and so that levels
// above the current choice get measured: every `probe_every` steps without planning above the choice, the next
// level up is planned once (a probe). A level is only ever planned (by warm-up, choice or probe) if it could pay
// when every draft token were accepted: (1 + b) / cost(b) > score(0). So with a cost that grows faster than the
// tokens a draft can yield, not one draft step is made; with a flat cost, the largest budget always wins.
// Contexts: the strategy classifies each coming step (Strategy::draft_context: prompt lookup's match length, the
// LADE pool's candidates for the root) and the acceptance statistics are kept per class as well as strategy-wide:
// a class seen before is judged on its own statistics (no match: plain steps, a long match: a long draft), a
// class never seen on the strategy-wide ones. A class that has only run plain steps has learned nothing about
// drafting (a plan of budget 0 accepts nothing whatever the context), so it too is judged on the strategy-wide
// statistics until one of its steps drafts: otherwise the first plain choice in a class (e.g. a suffix draft that
// expects 2-4 accepted tokens) would read as "drafts accept nothing here" and keep the class plain.
// Size hints: a strategy that knows before planning how many nodes its draft holds (Strategy::draft_size_hint:
// suffix, prompt lookup) has each budget b costed at min(b, hint) nodes, and a budget at or above the hint (the
// same plan) is not probed; without a hint an unplanned budget is costed as full (the cautious cost).
// Stale levels (size hints): a level measured less, in decayed weight, than the best-measured level below it is
// judged on its measurements plus, for the observations it lacks, the extrapolation from that level: a class
// whose first long drafts failed by chance is not held at short drafts by those two samples (decay ages a level's
// weight but not its mean, and a level above the choice is only measured by a probe).
// Probes are paid for: one costs its extra forward time over the chosen level, so the interval grows until probing
// takes at most `probe_share` of the step time (with a steep cost, e.g. a compute-bound CPU forward where two
// tokens cost 1.4 plain steps, every 16 steps would be 2.5%; on a flat GPU cost it is free and every 16 holds).
// A young context class probes sooner: its first probes come after 2, 4, 8, ... of its steps (a few cheap steps
// over the class's life), so a class judged on two unlucky first drafts is re-measured within steps.
// Warm-up: the strategy's first `warmup_steps` steps (the controller lives as long as the strategy, across
// requests) plan the largest budget that costs at most `warmup_cost` plain steps, measuring every level below it
// at once (on a flat cost: the largest budget; on a steep one a 65-token step would cost four plain steps).
// The ledger (a bound on what drafting can lose): every drafted step's realized gain over a plain step, in the
// cost model's seconds: its accepted tokens (those the request kept: none past eos or the length limit) at a
// plain step's price per token, minus what its extra rows cost (as
// measured where the runner timed the forward, below: "Measured rows"; else the model's price).
// A draft (warm-up, probe or choice alike) is planned only if its loss should nothing be accepted fits in the
// ledger plus `explore_share` of all steps' time (this request's share of batched steps) plus `explore_credit`
// lone plain steps; otherwise the best level that fits (often plain) runs. So drafting can lose at most a few
// percent over plain decoding, whatever the estimates say, while drafts that pay earn the room for more: on a tiny
// model where a 32-token step costs 20 plain steps, suffix's optimistic whole-draft warm-ups and extrapolations
// ran at 0.62-0.70x plain (stories260K) before this; on a flat (GPU) cost a draft risks nothing and is never held.
// The ledger's baseline is plain decoding without a strategy (`ar`): every step is charged the host time of the
// strategy's bookkeeping (matching, planning, updating its structures), and so are begin_request/end_request
// (charge()). Dormancy: when the ledger's room runs out, the strategy sleeps: the step runner runs plain steps
// without calling it at all (no matching, no planning, no updates; a request still begins and ends in it, so it
// learns every output) until the exploration allowance has refilled explore_credit plain steps of room;
// then it wakes (catching up with the sequence in its next plan) and tries again. So even a strategy whose bookkeeping costs more than the forward (a 50 us step of a tiny
// model against a suffix tree of a million nodes) costs plain decoding a few percent, and on a real model, where
// drafts pay, the ledger only grows and nothing ever sleeps.
//
// Batches: the slots of a batch (batch_runner.h) share one ledger (share_ledger): one account of what drafting
// gained and paid over the whole step, one exploration allowance (explore_share of all steps' time plus
// explore_credit lone plain steps, once), one dormancy. With a ledger per slot, 16 slots held 16 allowances: on a
// job of 24 short requests at --batch 16 that alone let drafting lose 5-9% to batched plain decoding. Every cost a
// slot weighs against its own gain (a warm-up's cap, a probe's share of step time) is its share of the step: a
// probe of 2 rows is 2/16 of a 16-row step, not 2 rows over the step. Prompt chunks of joining requests share the
// step but yield no token: a draft's rows are priced where the step sits on the cost curve (with the chunks), and
// an accepted token is worth its share of the step without them. Priced with them, a token on SmolLM2 at --batch 16
// (52% of the rows prompt chunks) looked worth twice a row and drafting that lost 11% was booked as a 29% gain.
// Nor do the other slots' drafts set a token's worth: it is the price per token of the batched plain step of the
// D requests decoding (cost(D) / D), not this step's cost over its tokens, which grows with the others' draft rows
// faster than with their accepted tokens: priced so, each slot's drafts made the others' look better. A slot's chosen draft holds its worst loss in
// the ledger until observed, so the slots planned later in the same step see the room it took.
// Exploration follows the headroom: each step adds explore_share of its time to the allowance, times what the best
// draft the ladder offers would gain at that step size if every row were accepted, over its tokens' price (the
// most over budgets b of 1 - extra(b) / (b price), at most 1): nearly all of it alone, a fifth where every row
// costs 0.8 of a token's share (a compute-bound batched step), nothing where a row costs a whole token. Where the
// best possible draft barely pays, drafting may barely lose: with the full 2% at every step size, the default lost
// 2-5% to batched plain decoding at --batch 16. The best over budgets, not one row's: where the first extra row
// costs a step and the next ones little (the CPU's sketched head serves a plain step of up to 4 requests), one
// row read 0.2 at --batch 4 where 8 rows could gain 0.85, and a strategy whose drafts paid 20% there slept for
// most of a job after one failed try (GSM8K x 32, 2 of 4 runs).
//
// Measured rows: the ledger books a drafted step's rows at what they were measured to add to the forward (the
// runner's timed forward minus the cost model's plain step of that size at the positions its rows attend:
// cost_model.h, "Context"), not at the cost model's price, when the runner gives it (measured_extra). So the bound on what drafting loses holds in real time even where the model
// is wrong in a way it cannot learn: on SmolLM2 at --batch 4 the model read the 17-row forwards at 53 ms where they
// took 56, booked "drafting gained 0.3%", and the job ran at 0.90x plain. One step's reading is clamped to the
// model's price minus, and four times it plus, 15% of the plain step (a preempted forward is not all the drafts'
// doing); the choice itself still scores levels on the model, which each forward keeps learning.
//
// Determinism: only which draft is proposed depends on timings; the verifier accepts exactly the tokens plain
// decoding would produce (greedy) or the position-keyed samples (sampling), whatever the budget.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "lookahead/decode/acceptance_model.h"
#include "lookahead/decode/cost_model.h"
#include "lookahead/decode/step_plan.h"
#include "lookahead/decode/strategy.h"

namespace la {

struct AdaptiveOptions {
  int probe_every = 16;         // steps without planning above the chosen level before one probe one level up
  int warmup_steps = 2;         // first steps of the strategy's life at the largest budget
  double decay = 1.0 / 64;      // acceptance statistics: weight lost per observation
  bool host_overhead = true;    // add measured host time per level to the step cost
  double prefer_larger = 0.01;  // relative score margin within which the larger budget wins
  double min_gain = 0.03;       // a draft costlier than a plain step must beat it by this relative margin
  double probe_share = 0.02;    // at most this share of step time spent on probes (their extra cost)
  double warmup_cost = 2.0;     // a warm-up step costs at most this many plain steps
  double explore_share = 0.02;  // drafting may lose at most this share of all steps' time ...
  double explore_credit = 2.0;  // ... plus this many lone plain steps
};

// What drafting gained over plain decoding and what all steps cost, in the cost model's seconds (see the
// header): one per controller, or one per batch shared by its slots' controllers.
struct DraftLedger {
  double gain_s = 0;  // drafting's realized gain over plain steps so far (may be < 0)
  double paid_s = 0;  // all steps so far (each request's share of batched steps)
  double held_s = 0;  // worst losses of drafts chosen and not yet observed (the other slots of this step)
  double allow_s = 0; // the exploration allowance: explore_share of each step's share, times its headroom()
  bool dormant = false;
};

struct AdaptiveCounters {
  std::map<int, int64_t> budget_hist;  // chosen budget -> steps
  int64_t steps = 0, plain_steps = 0, probe_steps = 0, warmup_steps = 0;
  int64_t explore_held = 0;   // drafts the ledger held back (a smaller level ran)
  int64_t dormant_steps = 0;  // plain steps run while the strategy slept
  int64_t sleeps = 0;         // times the strategy was put to sleep
  void add(const AdaptiveCounters& o);
};

class DraftController {
 public:
  // `strategy` and `cost` must outlive the controller.
  DraftController(Strategy& strategy, StepCostModel& cost, AdaptiveOptions opt = {});
  ~DraftController() { ledger_->held_s -= held_s_; }
  DraftController(const DraftController&) = delete;
  DraftController& operator=(const DraftController&) = delete;
  // Batched steps (batch_runner.h): the rest of the coming step holds `other_rows` rows of other requests that
  // yield `other_tokens` tokens. The budget is then chosen for the step's tokens per second as a whole: a draft
  // pays when its expected extra tokens beat the marginal cost of its rows at that step size. (0, 0): alone.
  // `chunk_rows` of the other rows are prompt chunks (fixed work that yields no token): they set where the step
  // sits on the cost curve (what a draft's rows cost), but a token's value is its share of the step without them.
  // `other_slots`: the other requests decoding in the step (default: other_tokens, one token each): a token's
  // worth in the ledger is its share of their batched plain step (token_price()).
  void set_batch(double other_rows, double other_tokens, double chunk_rows = 0, double other_slots = -1) {
    other_rows_ = other_rows;
    other_tokens_ = other_tokens;
    chunk_rows_ = chunk_rows;
    other_slots_ = other_slots >= 0 ? other_slots : other_tokens;
  }
  // A batch's cap on this request's draft (DraftCap, draft_cap.h): the coming choices, warm-ups and probes
  // included, take budgets up to `budget` only (< 0: none). An offer within the cap is still reported as the
  // whole draft. `exact`: the choice is the cap itself (no warm-up, probe or score), when the ledger can risk it;
  // the batch measured that every request drafting it pays (a best reply per slot can miss it, draft_cap.h).
  void set_cap(int budget, bool exact = false) {
    cap_ = budget;
    exact_ = exact && budget > 0;
  }
  // The slots of a batch share one ledger (`l` must outlive the controller); by default a controller has its own.
  void share_ledger(DraftLedger& l) { ledger_ = &l; }
  const DraftLedger& ledger() const { return *ledger_; }
  // Chooses the budget of the next step (whose context class the strategy gave) and sets it on the strategy.
  int choose(int context = 0);
  // What the coming observe()'s step's draft rows were measured to add to the forward: the timed forward minus the
  // cost model's plain step (a batch: the batch's excess over its plain rows, this slot's share by its draft rows).
  // The ledger then books it (see the header, "Measured rows") instead of the cost model's price.
  void measured_extra(double seconds) {
    measured_extra_ = seconds;
    measured_ = true;
  }
  // The step planned after the last choose(): the plan run and its verdict (as verified, before eos/length cuts),
  // the host seconds of the step outside the forward, and the tokens the request kept (after the cuts; -1: all of
  // the verdict's). The acceptance statistics learn the verdict (what the draft was worth); the ledger books only
  // the kept tokens (accepted tokens cut at eos or at the length limit saved nothing).
  void observe(const StepPlan& plan, const Verdict& verdict, double host_seconds, int kept = -1);
  // Dormancy (see the header): the strategy sleeps while dormant(); the runner then runs plain steps without it
  // and reports each through observe_dormant(). charge(): host seconds the strategy spent outside steps.
  bool dormant() const { return ledger_->dormant; }
  void observe_dormant();
  void charge(double seconds);
  // Predicted tokens per second of a ladder level in the current context (tests, logs).
  double score(int level) const;
  bool could_pay(int level) const;
  const std::vector<int>& ladder() const { return model_.ladder(); }
  const AcceptanceModel& acceptance() const { return model_; }
  double expected_accepted(int level) const;  // in the current context
  double expected_nodes(int level) const;
  const AdaptiveCounters& counters() const { return counters_; }
  // Steps chosen at each ladder level per context class (context * levels + level): the budgets against what the
  // strategy saw (match length, pool candidates), for the stats. Preallocated: choosing allocates nothing.
  int64_t context_steps(int context, int level) const { return ctx_steps_[context * model_.levels() + level]; }
  int contexts() const { return static_cast<int>(ctx_.size()); }
  int last_budget() const { return model_.ladder()[level_]; }
  bool last_was_probe() const { return probe_; }
  // Now on the cost model's clock (host times passed to observe() are read on it).
  double now() const { return cost_.now(); }
  // The cost model the step runner feeds (StepRunner::step, StepExecutor::observe_cost).
  StepCostModel& cost_model() { return cost_; }

 private:
  double step_cost(int level, double nodes) const;
  double nodes_at(int level) const;
  double extrapolated(int from_level, int level) const;
  double accepted_at(int level) const;  // one level's estimate (expected_accepted: the running max with a hint)  // draft nodes a plan at this level holds: the hint's, or the expected
  const AcceptanceModel& current() const;  // the statistics for the current context class
  double host(int level) const;
  int warmup_level(int top) const;  // (top: the largest level the cap allows)
  int probe_interval(int pick, int up) const;
  int best_level(double room, int top) const;  // the best-scoring level up to top whose worst loss fits room
  double worst_loss(int level) const;  // its extra cost over a plain step if nothing is accepted
  double room() const;                 // the loss drafting may still risk (the ledger)
  double headroom() const;             // what an accepted one-row draft gains, over the token's price (0..1)

  Strategy& s_;
  StepCostModel& cost_;
  AdaptiveOptions opt_;
  AcceptanceModel model_;                // every step
  std::vector<AcceptanceModel> ctx_;     // per context class
  int context_ = 0;
  int hint_ = -1;       // the strategy's draft_size_hint() for the coming step (-1: none, or nothing to draft)
  bool empty_ = false;  // the strategy had nothing to draft this step (hint 0)
  std::vector<double> host_s_;
  std::vector<uint8_t> host_seen_;
  int level_ = 0;
  int cap_ = -1;        // set_cap()
  bool exact_ = false;  // set_cap(): the cap is the choice
  bool probe_ = false;
  double other_rows_ = 0, other_tokens_ = 0, chunk_rows_ = 0, other_slots_ = 0;  // set_batch()
  double token_price() const;  // a token's worth: a batched plain step of the decoding requests over its tokens
  double base_s() const;  // the coming step as a plain step without the prompt chunks' rows
  double extra_s(double rows) const;  // what `rows` more rows add to the coming step
  DraftLedger own_ledger_;
  DraftLedger* ledger_ = &own_ledger_;
  double plain_s_ = 0;   // the coming step's forward as a plain step (no strategy: the ledger's baseline)
  double price_s_ = 0;   // token_price() of the coming step
  double held_s_ = 0;    // what this controller's chosen draft holds in the ledger until observed
  double measured_extra_ = 0;  // measured_extra(), for the next observe() only
  bool measured_ = false;
  double share(double step_s, double accepted) const;  // this request's share of a step's seconds
  void settle();         // after the ledger moved: sleep when its room ran out, wake when it refilled
  std::vector<int64_t> since_probe_;  // per context class
  std::vector<int> class_warm_;       // per context class: warm-up drafts planned (size hints only)
  std::vector<int> class_probes_;     // per context class: probes made (a young class probes sooner)
  AdaptiveCounters counters_;
  std::vector<int64_t> ctx_steps_;
  std::vector<int> rank_, path_ranks_, acc_, nodes_;  // scratch, reused every step
};

}  // namespace la
