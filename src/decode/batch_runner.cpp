// Continuous batching (what a step does and why it is exact: include/lookahead/decode/batch_runner.h).
#include "lookahead/decode/batch_runner.h"

#include <algorithm>

#include "lookahead/util/error.h"

namespace la {

struct BatchRunner::Slot {
  std::unique_ptr<StepModel> own_model;  // a fork (slots > 0)
  StepModel* model = nullptr;
  std::unique_ptr<Strategy> own_strategy;  // a spawn (slots > 0)
  Strategy* strategy = nullptr;
  std::unique_ptr<LocalExecutor> exec;
  std::unique_ptr<DraftController> controller;
  std::unique_ptr<StepRunner> runner;
  int64_t tag = -1;
  bool busy = false;
  bool prefill = false;   // prompt tokens are still being fed
  bool staged_prefill = false;
  int64_t rows = 0;       // reserved cache rows
  int last_rows = 1;      // rows of its last decode step (the next one's estimate for the other slots)
  int last_tokens = 1;    // tokens its last decode step yielded
};

BatchRunner::BatchRunner(StepModel& model, Strategy& strategy, const ModelConfig& cfg, const BatchOptions& opt,
                         StepCostModel* cost, std::function<std::unique_ptr<DraftController>(Strategy&)> make)
    : model_(model), strategy_(strategy), cfg_(cfg), opt_(opt), cost_(cost), make_controller_(std::move(make)) {
  LA_CHECK(opt_.slots >= 1, "--batch must be >= 1 (got ", opt_.slots, ")");
  LA_CHECK(opt_.prefill_chunk >= 1, "--prefill-chunk must be >= 1 (got ", opt_.prefill_chunk, ")");
  const int top = std::max(0, strategy.max_draft_budget());
  // A prompt chunk stays inside the prompt; a decode step adds the pending root and the largest plan.
  max_step_rows_ = 2 + top + strategy.lookahead_nodes(top);
  if (opt_.kv_rows <= 0) opt_.kv_rows = int64_t(opt_.slots) * (cfg.max_positions + max_step_rows_);
  slots_.resize(opt_.slots);
  items_.reserve(opt_.slots);
  staged_.reserve(opt_.slots);
  finished_.reserve(opt_.slots);
}

BatchRunner::~BatchRunner() = default;

BatchRunner::Slot& BatchRunner::open_slot(int i) {
  if (slots_[i]) return *slots_[i];
  auto s = std::make_unique<Slot>();
  if (i == 0) {
    s->model = &model_;
    s->strategy = &strategy_;
  } else {
    s->own_model = model_.fork();
    LA_CHECK(s->own_model != nullptr, "--batch ", opt_.slots, ": this model cannot be replicated (fork)");
    s->model = s->own_model.get();
    s->own_strategy = strategy_.spawn(i);
    LA_CHECK(s->own_strategy != nullptr, "--batch ", opt_.slots, ": strategy ", strategy_.name(),
             " cannot serve a batch");
    s->strategy = s->own_strategy.get();
  }
  s->exec = std::make_unique<LocalExecutor>(*s->model);
  s->runner = std::make_unique<StepRunner>(*s->exec, *s->strategy, cfg_);
  if (make_controller_) {
    s->controller = make_controller_(*s->strategy);
    if (s->controller) s->controller->share_ledger(ledger_);
    s->runner->set_controller(s->controller.get());
  }
  slots_[i] = std::move(s);
  return *slots_[i];
}

int64_t BatchRunner::rows_needed(int prompt_len, int max_new) const {
  const int64_t seq = max_new >= 0 ? int64_t(prompt_len) + max_new : int64_t(cfg_.max_positions);
  return std::min<int64_t>(seq, cfg_.max_positions) + max_step_rows_;
}

bool BatchRunner::fits_now(int prompt_len, int max_new) const {
  return has_free_slot() && reserved_ + rows_needed(prompt_len, max_new) <= opt_.kv_rows;
}

bool BatchRunner::prefilling(int slot) const { return slots_[slot] && slots_[slot]->prefill; }
int64_t BatchRunner::tag(int slot) const { return slots_[slot]->tag; }
bool BatchRunner::busy(int slot) const { return slots_[slot] && slots_[slot]->busy; }
StepRunner& BatchRunner::runner(int slot) { return *slots_[slot]->runner; }

int BatchRunner::add(int64_t tag, const std::vector<int32_t>& prompt, const SampleParams& sp,
                     const StepLimits& limits) {
  LA_CHECK(fits_now(static_cast<int>(prompt.size()), limits.max_new), "batch: request ", tag, " does not fit now");
  int i = 0;
  while (slots_[i] && slots_[i]->busy) ++i;
  Slot& s = open_slot(i);
  s.tag = tag;
  s.busy = true;
  s.rows = rows_needed(static_cast<int>(prompt.size()), limits.max_new);
  reserved_ += s.rows;
  ++active_;
  counters_.max_active = std::max<int64_t>(counters_.max_active, active_);
  s.exec->begin_deferred(prompt, sp);
  s.model->reserve_cache(static_cast<int>(s.rows));
  s.runner->begin_state(prompt, limits);
  s.prefill = s.exec->prefill_left(s.runner->seq()) > 0;
  s.last_rows = 1;
  s.last_tokens = 1;
  return i;
}

void BatchRunner::release(int slot) {
  Slot& s = *slots_[slot];
  if (!s.busy) return;
  s.runner->end();
  s.busy = false;
  s.prefill = false;
  reserved_ -= s.rows;
  s.rows = 0;
  --active_;
}

void BatchRunner::step() {
  finished_.clear();
  items_.clear();
  staged_.clear();
  int rows = 0;
  auto stage = [&](int i, const StepInput& in) {
    Slot& s = *slots_[i];
    items_.push_back(BatchItem{s.model, &in, &s.exec->sample_params(), &s.exec->forward_out()});
    staged_.push_back(i);
    rows += static_cast<int>(in.tokens.size());
  };
  // Prompt chunks first: they are fixed, the decoding slots' budgets are chosen knowing them.
  for (int i = 0; i < slots(); ++i) {
    Slot* s = slots_[i].get();
    if (!s || !s->busy) continue;
    s->staged_prefill = s->prefill;
    if (s->prefill) stage(i, s->exec->stage_prefill(s->runner->seq(), opt_.prefill_chunk));
  }
  const int chunk_rows = rows;  // the prompt chunks' rows (DraftController::set_batch)
  // The decoding slots' last step sizes and yields: what each controller takes the rest of the step to be.
  auto decodes = [](const Slot* s) { return s && s->busy && !s->staged_prefill && !s->runner->done(); };
  int later_rows = 0, all_tokens = 0, deciding = 0;
  for (const auto& s : slots_)
    if (decodes(s.get())) later_rows += s->last_rows, all_tokens += s->last_tokens, ++deciding;
  int decoding = 0;
  for (int i = 0; i < slots(); ++i) {
    Slot* s = slots_[i].get();
    if (!decodes(s)) continue;
    later_rows -= s->last_rows;  // the slots after this one, at their last sizes
    // The rest of the step: rows staged so far (prompt chunks, the earlier slots' plans) and the later slots.
    if (s->controller) s->controller->set_batch(rows + later_rows, all_tokens - s->last_tokens, chunk_rows, deciding - 1);
    s->runner->plan_step();
    const StepInput& in = s->exec->stage(s->runner->seq(), s->runner->plan());
    s->last_rows = static_cast<int>(in.tokens.size());
    counters_.draft_rows += s->runner->plan().size() - 1;
    stage(i, in);
    ++decoding;
  }
  LA_CHECK(!items_.empty(), "batch: a step with no request in flight");
  const double t0 = cost_ ? cost_->now() : 0.0;
  model_.forward_batch(items_.data(), static_cast<int>(items_.size()));
  if (cost_) cost_->observe_forward(rows, cost_->now() - t0);
  ++counters_.steps;
  counters_.rows += rows;
  counters_.slot_steps += decoding;
  for (size_t k = 0; k < staged_.size(); ++k) {
    Slot& s = *slots_[staged_[k]];
    if (s.staged_prefill) {
      counters_.prefill_rows += static_cast<int64_t>(items_[k].in->tokens.size());
      s.exec->commit_prefill();
      s.prefill = s.exec->prefill_left(s.runner->seq()) > 0;
      continue;
    }
    s.exec->collect(s.exec->forward_out(), s.runner->results_buffer());
    s.last_tokens = s.runner->finish_step();
    if (s.runner->done()) finished_.push_back(staged_[k]);
  }
  counters_.draft_gain_s = ledger_.gain_s;
  counters_.draft_paid_s = ledger_.paid_s;
}

std::vector<std::map<std::string, double>> BatchRunner::slot_counters() const {
  std::vector<std::map<std::string, double>> v;
  for (const auto& s : slots_)
    if (s) v.push_back(s->strategy->counters());
  return v;
}

AdaptiveCounters BatchRunner::adaptive_counters() const {
  AdaptiveCounters c;
  for (const auto& s : slots_)
    if (s && s->controller) c.add(s->controller->counters());
  return c;
}

}  // namespace la
