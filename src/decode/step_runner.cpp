#include "lookahead/decode/step_runner.h"

#include <algorithm>
#include <chrono>

#include "lookahead/util/error.h"

namespace la {
namespace {
using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

double RequestStats::mean_accepted() const { return steps ? double(new_tokens - steps) / steps : 0.0; }

void RequestStats::add(const RequestStats& o) {
  prompt_tokens += o.prompt_tokens;
  new_tokens += o.new_tokens;
  steps += o.steps;
  draft_tokens += o.draft_tokens;
  lookahead_tokens += o.lookahead_tokens;
  step_tokens += o.step_tokens;
  if (accept_hist.size() < o.accept_hist.size()) accept_hist.resize(o.accept_hist.size(), 0);
  for (size_t i = 0; i < o.accept_hist.size(); ++i) accept_hist[i] += o.accept_hist[i];
  seconds += o.seconds;
  prefill_s += o.prefill_s;
  draft_s += o.draft_s;
  forward_s += o.forward_s;
  verify_s += o.verify_s;
  commit_s += o.commit_s;
  cpu_s += o.cpu_s;
  adaptive = adaptive || o.adaptive;
  budgets.add(o.budgets);
}

void StepRunner::begin(const std::vector<int32_t>& prompt, const SampleParams& sp, const StepLimits& limits) {
  LA_CHECK(!prompt.empty(), "empty prompt (no tokens, not even BOS)");
  const auto t0 = Clock::now();
  exec_.begin(prompt, sp);
  const double prefill_s = secs(t0, Clock::now());
  begin_state(prompt, limits);
  stats_.prefill_s = prefill_s;
}

StepRunner::StepRunner(StepExecutor& exec, Strategy& strategy, const ModelConfig& cfg)
    : exec_(exec), strategy_(strategy), cfg_(cfg) {
  const int rows = max_step_rows(strategy);
  reserve_step(rows);
  exec_.reserve_step(2 * rows);  // the input adds the pending chain to the plan: up to a step
}

int StepRunner::max_step_rows(const Strategy& strategy) {
  const int top = std::max(0, strategy.max_draft_budget());
  return 2 + top + strategy.lookahead_nodes(top);
}

void StepRunner::reserve_step(int nodes) {
  const size_t n = static_cast<size_t>(std::max(nodes, 1));
  plan_.reserve(nodes);
  results_.reserve(n);
  verdict_.path.reserve(n);
  verdict_.tokens.reserve(n + 1);
  path_.reserve(n);
}

void StepRunner::begin_state(const std::vector<int32_t>& prompt, const StepLimits& limits) {
  LA_CHECK(!prompt.empty(), "empty prompt (no tokens, not even BOS)");
  limits_ = limits;
  prompt_len_ = static_cast<int>(prompt.size());
  stats_ = RequestStats{};
  stats_.prompt_tokens = prompt_len_;
  stats_.adaptive = controller_ != nullptr;
  // Sized for the whole request up front: a step appends at most max_depth + 1 tokens, so the sequence never
  // outgrows the context plus one (or the new-token limit).
  const int most = limits.max_new >= 0 ? prompt_len_ + limits.max_new : std::max(prompt_len_, limits.max_positions) + 1;
  seq_.reserve(static_cast<size_t>(most));
  seq_.assign(prompt.begin(), prompt.end());
  stats_.accept_hist.reserve(static_cast<size_t>(std::min(most - prompt_len_, 1024) + 2));
  const double h = controller_ ? controller_->now() : 0.0;
  if (controller_) sleeps_seen_ = controller_->counters().sleeps;
  strategy_.begin_request(prompt);
  if (controller_) controller_->charge(controller_->now() - h);
  note_sleeps();
  if (!controller_) strategy_.set_draft_budget(-1);
  else for (int b : controller_->ladder()) stats_.budgets.budget_hist[b] = 0;  // no map node allocated in a step
  done_ = limits.max_new == 0;
  if (done_) stats_.finish_reason = "length";
}

// The one place a step's time reaches the cost model (batched steps: the batch runner times the whole forward).
int StepRunner::step() {
  plan_step();
  exec_.run(seq_, plan_, results_);
  timed_ = true;  // finish_step reads the forward's time (h2_ - h1_) for the ledger
  const int kept = finish_step();
  if (controller_ && !asleep_) exec_.observe_cost(controller_->cost_model(), h2_ - h1_);
  return kept;
}

void StepRunner::plan_step() {
  LA_CHECK(!done_, "step runner: step after the request ended");
  RequestStats& st = stats_;
  const int root_pos = static_cast<int>(seq_.size()) - 1;
  max_depth_ = limits_.max_positions - 1 - root_pos;
  // A step keeps at most the tokens the request may still make: draft rows deeper than that would be verified
  // and cut (and priced as a gain by the controller's ledger). Outputs do not change: only the draft is shorter.
  if (limits_.max_new >= 0) max_depth_ = std::min(max_depth_, limits_.max_new - generated() - 1);
  t0_ = Clock::now();
  // The controller's host time is read on the cost model's clock (thread CPU time for a one-thread CPU forward).
  // A sleeping strategy (draft_controller.h: dormancy) is not asked: a plain step, not timed. Awake again, it
  // catches up with the tokens it did not see in its next plan (every strategy plans from the whole sequence).
  // The coming step's rows attend about root_pos positions: the cost model prices them there (cost_model.h).
  if (controller_) controller_->cost_model().set_context(root_pos);
  asleep_ = controller_ && controller_->dormant();
  h0_ = controller_ && !asleep_ ? controller_->now() : 0.0;
  if (asleep_) {
    plan_.reset(seq_.back());
    ++st.budgets.steps;
    ++st.budgets.budget_hist[0];
    ++st.budgets.plain_steps;
    ++st.budgets.dormant_steps;
    t1_ = t0_;
    h1_ = h0_;
    return;
  }
  if (controller_) {
    const int b = controller_->choose(strategy_.draft_context(seq_, max_depth_));
    ++st.budgets.steps;
    ++st.budgets.budget_hist[b];
    if (b == 0) ++st.budgets.plain_steps;
    if (controller_->last_was_probe()) ++st.budgets.probe_steps;
  }
  strategy_.plan(seq_, max_depth_, plan_);
  plan_.validate();
  LA_CHECK(plan_.tokens[0] == seq_.back(), "strategy ", strategy_.name(), ": plan root is not the last token");
  t1_ = Clock::now();
  h1_ = controller_ ? controller_->now() : 0.0;
}

int StepRunner::finish_step() {
  RequestStats& st = stats_;
  const auto t2 = Clock::now();
  h2_ = controller_ && !asleep_ ? controller_->now() : 0.0;
  // A lone step: what its draft rows added to the forward, measured (draft_controller.h, "Measured rows").
  if (timed_ && controller_ && !asleep_ && plan_.size() > 1)
    controller_->measured_extra(h2_ - h1_ - controller_->cost_model().step_seconds(1));
  timed_ = false;
  if (verifier_) verdict_ = verifier_(plan_, results_);
  else verify_plan(plan_, results_, verdict_);
  const auto t3 = Clock::now();
  // The strategy sees the sequence before the new tokens (no copy of it: the update runs before the append).
  if (!asleep_) strategy_.update(seq_, plan_, results_, verdict_);
  const auto t4 = Clock::now();
  int kept = 0;
  for (int32_t tok : verdict_.tokens) {
    seq_.push_back(tok);
    ++kept;
    if (limits_.stop_at_eos && cfg_.is_eos(tok)) { st.finish_reason = "eos"; done_ = true; break; }
    if (limits_.stop && limits_.stop->append(tok)) { st.finish_reason = "stop"; done_ = true; break; }
    if (limits_.max_new >= 0 && generated() >= limits_.max_new) { st.finish_reason = "length"; done_ = true; break; }
  }
  path_.assign(verdict_.path.begin(), verdict_.path.begin() + std::min<size_t>(verdict_.path.size(), kept));
  exec_.commit(seq_, path_);
  const auto t5 = Clock::now();
  if (asleep_) controller_->observe_dormant();
  else if (controller_) controller_->observe(plan_, verdict_, (h1_ - h0_) + (controller_->now() - h2_), kept);
  note_sleeps();
  st.steps++;
  st.new_tokens = generated();
  st.draft_tokens += plan_.num_draft();
  st.lookahead_tokens += plan_.num_lookahead();
  st.step_tokens += plan_.size();
  if (static_cast<int>(st.accept_hist.size()) <= kept) st.accept_hist.resize(kept + 1, 0);
  st.accept_hist[kept]++;
  st.draft_s += secs(t0_, t1_) + secs(t3, t4);
  st.forward_s += secs(t1_, t2);
  st.verify_s += secs(t2, t3);
  st.commit_s += secs(t4, t5);
  return kept;
}

// The times this request's controller put the strategy to sleep since the last look (its bookings and charges; a
// batch's shared ledger is put to sleep by one slot's controller, so each sleep is counted once).
void StepRunner::note_sleeps() {
  if (!controller_) return;
  const int64_t n = controller_->counters().sleeps;
  stats_.budgets.sleeps += n - sleeps_seen_;
  sleeps_seen_ = n;
}

// Every request ends in the strategy, asleep or not: it learns the whole output (global trees, state files).
void StepRunner::end() {
  const double h = controller_ ? controller_->now() : 0.0;
  strategy_.end_request(seq_);
  if (controller_) controller_->charge(controller_->now() - h);
  note_sleeps();
  exec_.end();
  done_ = true;
}

}  // namespace la
