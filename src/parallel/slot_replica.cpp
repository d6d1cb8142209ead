// SlotReplica: one replica's batch slots, staged and run as one forward (slot_replica.h).
#include "lookahead/parallel/slot_replica.h"

#include <algorithm>
#include <chrono>

#include "lookahead/util/clock.h"
#include "lookahead/util/error.h"

namespace la {

struct SlotReplica::Slot {
  std::unique_ptr<StepModel> own;  // a fork (slots > 0)
  StepModel* model = nullptr;
  std::unique_ptr<LocalExecutor> exec;
  bool busy = false;
  bool staged = false;  // staged in the current step
};

SlotReplica::SlotReplica(StepModel& model) : model_(model) {}
SlotReplica::~SlotReplica() = default;

SlotReplica::Slot& SlotReplica::at(int slot, const char* what) {
  LA_CHECK(slot >= 0 && slot < static_cast<int>(slots_.size()) && slots_[slot] && slots_[slot]->busy,
           "protocol error: ", what, " for slot ", slot, ", which holds no request");
  return *slots_[slot];
}

const SlotReplica::Slot& SlotReplica::at(int slot, const char* what) const {
  return const_cast<SlotReplica*>(this)->at(slot, what);
}

void SlotReplica::begin(int slot, const std::vector<int32_t>& prompt, const SampleParams& sp, int rows) {
  LA_CHECK(slot >= 0 && slot < kMaxSlots, "protocol error: slot ", slot, " out of range");
  LA_CHECK(!prompt.empty(), "protocol error: a slot's request with an empty prompt");
  if (static_cast<int>(slots_.size()) <= slot) slots_.resize(slot + 1);
  if (!slots_[slot]) {
    auto s = std::make_unique<Slot>();
    if (slot == 0) {
      s->model = &model_;
    } else {
      s->own = model_.fork();
      LA_CHECK(s->own != nullptr, "batched lookahead parallelism: this model (", model_.describe(),
               ") cannot be replicated (fork)");
      s->model = s->own.get();
    }
    s->exec = std::make_unique<LocalExecutor>(*s->model);
    slots_[slot] = std::move(s);
  }
  Slot& s = *slots_[slot];
  LA_CHECK(!s.busy, "protocol error: slot ", slot, " begins a request while it holds one");
  s.exec->begin_deferred(prompt, sp);
  s.model->reserve_cache(rows);
  // A step's buffers sized once for the slot's rows (no step holds more): the input, the output, and a result
  // buffer per item for as many items as slots (results travel between items and the group's replies).
  s.exec->reserve_step(rows);
  if (rows > max_rows_ || items_.size() < slots_.size()) {  // a request larger than any before, or a new slot
    max_rows_ = std::max(max_rows_, rows);
    if (items_.size() < slots_.size()) items_.resize(slots_.size());
    for (Item& it : items_) it.results.reserve(static_cast<size_t>(max_rows_));
  }
  batch_.reserve(slots_.size());
  s.busy = true;
  s.staged = false;
}

void SlotReplica::commit(int slot, const std::vector<int32_t>& seq, const std::vector<int32_t>& local_path) {
  Slot& s = at(slot, "a commit");
  LA_CHECK(static_cast<int>(seq.size()) > s.model->cache_len(), "protocol error: slot ", slot,
           " commit of a sequence its cache is not behind");
  s.exec->commit(seq, local_path);
}

void SlotReplica::end(int slot) {
  Slot& s = at(slot, "an end");
  s.exec->end();
  s.busy = false;
}

int SlotReplica::cache_len(int slot) const { return at(slot, "a cache length").model->cache_len(); }

SlotReplica::Item& SlotReplica::next_item(int slot, bool chunk) {
  Slot& s = at(slot, chunk ? "a prompt chunk" : "a part");
  LA_CHECK(!s.staged, "protocol error: slot ", slot, " staged twice in one step");
  s.staged = true;
  if (static_cast<int>(items_.size()) <= n_) items_.resize(n_ + 1);
  Item& it = items_[n_++];
  it.slot = slot;
  it.chunk = chunk;
  it.cache_len = s.model->cache_len();
  it.results.clear();
  return it;
}

void SlotReplica::stage_chunk(int slot, const std::vector<int32_t>& seq, int tokens) {
  Item& it = next_item(slot, true);
  Slot& s = *slots_[slot];
  LA_CHECK(tokens >= 1 && tokens <= s.exec->prefill_left(seq), "protocol error: slot ", slot, " prompt chunk of ",
           tokens, " tokens, ", s.exec->prefill_left(seq), " left");
  it.step_tokens = static_cast<int>(s.exec->stage_prefill(seq, tokens).tokens.size());
}

void SlotReplica::stage_part(int slot, const std::vector<int32_t>& seq, const StepPlan& plan) {
  Item& it = next_item(slot, false);
  Slot& s = *slots_[slot];
  LA_CHECK(static_cast<int>(seq.size()) > it.cache_len, "protocol error: slot ", slot, " part for a sequence of ",
           seq.size(), " tokens, its cache holds ", it.cache_len);
  it.step_tokens = static_cast<int>(s.exec->stage(seq, plan).tokens.size());
}

double SlotReplica::forward() {
  if (n_ == 0) return 0;
  batch_.clear();
  for (int i = 0; i < n_; ++i) {
    Slot& s = *slots_[items_[i].slot];
    // The executor's staged input (stage / stage_prefill keep it until the next stage).
    batch_.push_back(BatchItem{s.model, &s.exec->staged_input(), &s.exec->sample_params(), &s.exec->forward_out()});
  }
  const auto t0 = Clock::now();
  model_.forward_batch(batch_.data(), n_);
  const double f = seconds_since(t0);
  for (int i = 0; i < n_; ++i) {
    Item& it = items_[i];
    Slot& s = *slots_[it.slot];
    s.staged = false;
    if (it.chunk) s.exec->commit_prefill();
    else s.exec->collect(s.exec->forward_out(), it.results);
  }
  return f;
}

}  // namespace la
