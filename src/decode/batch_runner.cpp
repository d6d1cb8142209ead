// Continuous batching (what a step does and why it is exact: include/lookahead/decode/batch_runner.h).
#include "lookahead/decode/batch_runner.h"

#include <algorithm>
#include <chrono>

#include "lookahead/util/error.h"

namespace la {
namespace {

// A slot's StepRunner executor when the slots live on a replica group: the runner commits and ends through it;
// its steps run in phases (plan_step, the batch's round, finish_step), never through begin / run.
class GroupSlot : public StepExecutor {
 public:
  GroupSlot(SlotExecutor& x, int slot) : x_(x), slot_(slot) {}
  void begin(const std::vector<int32_t>&, const SampleParams&) override {
    fail("batch slot ", slot_, ": begin through the batch runner");
  }
  void run(const std::vector<int32_t>&, const StepPlan&, std::vector<int32_t>&) override {
    fail("batch slot ", slot_, ": steps run through the batch runner");
  }
  void commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) override {
    x_.commit_slot(slot_, seq, path);
  }
  void end() override { x_.end_slot(slot_); }

 private:
  SlotExecutor& x_;
  int slot_;
};

}  // namespace

struct BatchRunner::Slot {
  std::unique_ptr<StepModel> own_model;  // a fork (slots > 0)
  StepModel* model = nullptr;
  std::unique_ptr<Strategy> own_strategy;  // a spawn (slots > 0)
  Strategy* strategy = nullptr;
  std::unique_ptr<LocalExecutor> exec;   // slots in this process
  std::unique_ptr<GroupSlot> group;      // slots on a replica group (lookahead parallelism)
  std::unique_ptr<DraftController> controller;
  std::unique_ptr<StepRunner> runner;
  int64_t tag = -1;
  bool busy = false;
  bool prefill = false;   // prompt tokens are still being fed
  bool staged_prefill = false;
  int staged_rows = 0;    // rows of its item in the current step
  int64_t rows = 0;       // reserved cache rows
  int last_rows = 1;      // rows of its last decode step (the next one's estimate for the other slots)
  int last_tokens = 1;    // tokens its last decode step yielded
};

BatchRunner::BatchRunner(StepModel& model, Strategy& strategy, const ModelConfig& cfg, const BatchOptions& opt,
                         StepCostModel* cost, std::function<std::unique_ptr<DraftController>(Strategy&)> make,
                         SlotExecutor* replicas)
    : model_(model), strategy_(strategy), cfg_(cfg), opt_(opt), cost_(cost), make_controller_(std::move(make)),
      replicas_(replicas) {
  LA_CHECK(opt_.slots >= 1, "--batch must be >= 1 (got ", opt_.slots, ")");
  LA_CHECK(opt_.prefill_chunk >= 1, "--prefill-chunk must be >= 1 (got ", opt_.prefill_chunk, ")");
  // A prompt chunk stays inside the prompt; a decode step adds the pending root and the largest plan.
  max_step_rows_ = StepRunner::max_step_rows(strategy);
  if (opt_.kv_rows <= 0) opt_.kv_rows = int64_t(opt_.slots) * (cfg.max_positions + max_step_rows_);
  slots_.resize(opt_.slots);
  if (cost_ && make_controller_ && opt_.slots >= 2 && opt_.draft_cap) {
    cap_ = std::make_unique<DraftCap>(strategy.draft_ladder(), opt_.slots);
    for (size_t a = 0; a < cap_->caps().size(); ++a) counters_.cap_labels.push_back(cap_->label(a));
    counters_.cap_steps.assign(cap_->caps().size(), 0);
  }
  if (replicas_) replicas_->reserve_steps(opt_.slots, max_step_rows_);
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
    if (!replicas_) {  // on a replica group every replica makes its own slot caches
      s->own_model = model_.fork();
      LA_CHECK(s->own_model != nullptr, "--batch ", opt_.slots, ": this model cannot be replicated (fork)");
      s->model = s->own_model.get();
    }
    s->own_strategy = strategy_.spawn(i);
    LA_CHECK(s->own_strategy != nullptr, "--batch ", opt_.slots, ": strategy ", strategy_.name(),
             " cannot serve a batch");
    s->strategy = s->own_strategy.get();
  }
  StepExecutor* ex = nullptr;
  if (replicas_) {
    s->group = std::make_unique<GroupSlot>(*replicas_, i);
    ex = s->group.get();
  } else {
    s->exec = std::make_unique<LocalExecutor>(*s->model);
    ex = s->exec.get();
  }
  s->runner = std::make_unique<StepRunner>(*ex, *s->strategy, cfg_);  // sizes every buffer of a step
  if (s->exec) s->exec->reserve_step(opt_.prefill_chunk);              // and of a prompt chunk
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
  if (replicas_) {
    replicas_->begin_slot(i, prompt, sp, static_cast<int>(s.rows));
  } else {
    s.exec->begin_deferred(prompt, sp);
    s.model->reserve_cache(static_cast<int>(s.rows));
  }
  s.runner->begin_state(prompt, limits);
  s.prefill = (replicas_ ? replicas_->prefill_left(i, s.runner->seq()) : s.exec->prefill_left(s.runner->seq())) > 0;
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

// A slot's prompt chunk / plan into the step (here: its executor's input among the forward's items; on a replica
// group: staged there). Returns its rows.
int BatchRunner::stage_chunk(Slot& s, int i) {
  if (replicas_) return replicas_->stage_chunk(i, s.runner->seq(), opt_.prefill_chunk);
  const StepInput& in = s.exec->stage_prefill(s.runner->seq(), opt_.prefill_chunk);
  items_.push_back(BatchItem{s.model, &in, &s.exec->sample_params(), &s.exec->forward_out()});
  return static_cast<int>(in.tokens.size());
}

int BatchRunner::stage_plan(Slot& s, int i) {
  if (replicas_) return replicas_->stage_plan(i, s.runner->seq(), s.runner->plan());
  const StepInput& in = s.exec->stage(s.runner->seq(), s.runner->plan());
  items_.push_back(BatchItem{s.model, &in, &s.exec->sample_params(), &s.exec->forward_out()});
  return static_cast<int>(in.tokens.size());
}

void BatchRunner::step() {
  const auto step0 = std::chrono::steady_clock::now();
  finished_.clear();
  items_.clear();
  staged_.clear();
  int rows = 0;
  // The positions the step's rows attend, summed (the cost model's context: cost_model.h): all rows', and the
  // draft rows' (the rest is the step as a plain step: the prompt chunks and each decoding slot's root).
  double positions = 0, draft_positions = 0;
  // Prompt chunks first: they are fixed, the decoding slots' budgets are chosen knowing them.
  for (int i = 0; i < slots(); ++i) {
    Slot* s = slots_[i].get();
    if (!s || !s->busy) continue;
    s->staged_prefill = s->prefill;
    if (!s->prefill) continue;
    const auto& seq = s->runner->seq();
    const int left = replicas_ ? replicas_->prefill_left(i, seq) : s->exec->prefill_left(seq);
    s->staged_rows = stage_chunk(*s, i);
    const double first = static_cast<double>(seq.size()) - 1 - left;  // the chunk's first position
    positions += s->staged_rows * (first + 0.5 * (s->staged_rows - 1));
    rows += s->staged_rows;
    staged_.push_back(i);
  }
  const int chunk_rows = rows;  // the prompt chunks' rows (DraftController::set_batch)
  // The decoding slots' last step sizes and yields: what each controller takes the rest of the step to be.
  auto decodes = [](const Slot* s) { return s && s->busy && !s->staged_prefill && !s->runner->done(); };
  int later_rows = 0, all_tokens = 0, deciding = 0;
  int choosing = 0;  // decoding slots whose controllers choose: the batch caps their budgets (draft_cap.h)
  for (const auto& s : slots_) {
    if (!decodes(s.get())) continue;
    later_rows += s->last_rows;
    all_tokens += s->last_tokens;
    ++deciding;
    if (s->controller) ++choosing;
  }
  int decoding = 0;
  const int cap = cap_ ? cap_->choose(choosing) : -1;
  for (int i = 0; i < slots(); ++i) {
    Slot* s = slots_[i].get();
    if (!decodes(s)) continue;
    later_rows -= s->last_rows;  // the slots after this one, at their last sizes
    // The rest of the step: rows staged so far (prompt chunks, the earlier slots' plans) and the later slots.
    if (s->controller) {
      s->controller->set_cap(cap, cap_ && cap_->exact(cap, choosing));
      s->controller->set_batch(rows + later_rows, all_tokens - s->last_tokens, chunk_rows, deciding - 1);
    }
    s->runner->plan_step();
    s->last_rows = s->staged_rows = stage_plan(*s, i);
    const double root = static_cast<double>(s->runner->seq().size()) - 1;  // every row attends about as much
    positions += s->staged_rows * root;
    draft_positions += (s->staged_rows - 1) * root;
    counters_.draft_rows += s->runner->plan().size() - 1;
    rows += s->staged_rows;
    staged_.push_back(i);
    ++decoding;
  }
  LA_CHECK(!staged_.empty(), "batch: a step with no request in flight");
  const double t0 = cost_ ? cost_->now() : 0.0;
  const auto w0 = std::chrono::steady_clock::now();
  if (replicas_) replicas_->run_staged();
  else model_.forward_batch(items_.data(), static_cast<int>(items_.size()));
  counters_.forward_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  // The draft rows' measured excess over this step as a plain step (the controllers' ledger: draft_controller.h,
  // "Measured rows"), shared by the slots in proportion to their draft rows; read before the model learns it.
  const int draft_rows = rows - chunk_rows - decoding;
  double excess_per_row = 0;
  if (cost_) {
    const double fwd_s = cost_->now() - t0;
    // Prompt chunks choose no next token (no LM head): priced and booked as such (cost_model.h).
    // The plain step at the positions its rows attend (cost_model.h, "Context": at calibration's, ~6% low).
    const int plain_rows = rows - draft_rows;
    if (draft_rows > 0)
      excess_per_row =
          (fwd_s - cost_->step_seconds(plain_rows, chunk_rows, (positions - draft_positions) / plain_rows)) / draft_rows;
    cost_->observe_forward(rows, fwd_s, chunk_rows, positions / rows);
  }
  ++counters_.steps;
  counters_.rows += rows;
  counters_.slot_steps += decoding;
  int kept = 0;  // tokens the choosing slots kept
  for (int i : staged_) {
    Slot& s = *slots_[i];
    if (s.staged_prefill) {
      counters_.prefill_rows += s.staged_rows;
      if (replicas_) {
        s.prefill = replicas_->prefill_left(i, s.runner->seq()) > 0;
      } else {
        s.exec->commit_prefill();
        s.prefill = s.exec->prefill_left(s.runner->seq()) > 0;
      }
      continue;
    }
    if (replicas_) replicas_->collect_slot(i, s.runner->results_buffer());
    else s.exec->collect(s.exec->forward_out(), s.runner->results_buffer());
    if (s.controller && draft_rows > 0) s.controller->measured_extra(excess_per_row * (s.staged_rows - 1));
    s.last_tokens = s.runner->finish_step();
    if (s.controller) kept += s.last_tokens;
    if (s.runner->done()) finished_.push_back(i);
  }
  if (cap >= 0) {
    // Measured on the wall clock, the whole step (its planning and verification included); steps with prompt
    // chunks are not compared (their rows are not the cap's doing).
    if (chunk_rows == 0) cap_->observe(kept, std::chrono::duration<double>(std::chrono::steady_clock::now() - step0).count());
    ++counters_.cap_steps[static_cast<size_t>(cap_->last_arm())];
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
