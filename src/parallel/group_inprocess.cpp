// InProcessGroup: K replicas in this process, run one after another and timed (replica_group.h). Every replica's
// begin / forward / commit time is summed and its per-call maximum kept, so ParallelExecutor::modelled_seconds
// can replace the sequential replica work by what K devices working at once would take.
// On CUDA the forward returns host ids, so it synchronises and the host timer is correct.
#include <algorithm>
#include <chrono>

#include "lookahead/parallel/replica_group.h"
#include "lookahead/util/clock.h"
#include "lookahead/util/error.h"

namespace la {

// A group without batched steps says so (every group in this repository has them).
void ReplicaGroup::slot_begin(int, const std::vector<int32_t>&, const SampleParams&, int) {
  fail(backend(), " replica group: no batched steps");
}
void ReplicaGroup::slot_commit(int, const std::vector<int32_t>&, const std::vector<int32_t>&,
                               const std::vector<PlanPart>&) {
  fail(backend(), " replica group: no batched steps");
}
void ReplicaGroup::slot_end(int) { fail(backend(), " replica group: no batched steps"); }
void ReplicaGroup::run_slots(const std::vector<SlotWork>&, std::vector<PartReply>&) {
  fail(backend(), " replica group: no batched steps");
}

InProcessGroup::InProcessGroup(std::vector<StepModel*> models) {
  LA_CHECK(!models.empty(), "simulation: rank count must be >= 1 (got 0)");
  for (StepModel* m : models) ex_.push_back(std::make_unique<LocalExecutor>(*m));
}

InProcessGroup::InProcessGroup(StepModel& model, int k) {
  LA_CHECK(k >= 1, "simulation: rank count must be >= 1 (got ", k, ")");
  ex_.push_back(std::make_unique<LocalExecutor>(model));
  for (int r = 1; r < k; ++r) {
    auto m = model.fork();
    LA_CHECK(m != nullptr, "simulation: the model (", model.describe(), ") cannot be forked into replicas");
    ex_.push_back(std::make_unique<LocalExecutor>(*m));
    forks_.push_back(std::move(m));
  }
}

InProcessGroup::~InProcessGroup() {
  ex_.clear();  // the executors refer to the forks
}

void InProcessGroup::reserve_step(int rows) {
  for (auto& e : ex_) e->reserve_step(rows);
  path_.reserve(static_cast<size_t>(std::max(rows, 1)));  // a local path is at most the plan's depth
}

void InProcessGroup::account(double sum, double mx) {
  serial_s_ += sum;
  slowest_s_ += mx;
}

void InProcessGroup::begin(const std::vector<int32_t>& prompt, const SampleParams& sp) {
  double sum = 0, mx = 0;
  for (auto& e : ex_) {
    const auto t0 = Clock::now();
    e->begin(prompt, sp);
    const double t = seconds_since(t0);
    sum += t;
    mx = std::max(mx, t);
  }
  account(sum, mx);
}

void InProcessGroup::run(const std::vector<int32_t>& seq, const std::vector<PlanPart>& parts,
                         std::vector<PartReply>& replies) {
  const int k = size();
  LA_CHECK(static_cast<int>(parts.size()) == k, "in-process group: ", parts.size(), " parts for ", k, " replicas");
  replies.resize(k);
  double sum = 0, mx = 0;
  for (int r = 0; r < k; ++r) {
    PartReply& rep = replies[r];
    rep.cache_len = ex_[r]->model().cache_len();
    const auto t0 = Clock::now();
    ex_[r]->run(seq, parts[r].plan, rep.results);
    rep.forward_s = seconds_since(t0);
    rep.step_tokens = ex_[r]->last_step_tokens();
    rep.stop_signal = 0;
    sum += rep.forward_s;
    mx = std::max(mx, rep.forward_s);
  }
  account(sum, mx);
}

void InProcessGroup::commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path,
                            const std::vector<PlanPart>& parts) {
  double sum = 0, mx = 0;
  for (size_t r = 0; r < ex_.size(); ++r) {
    const auto t0 = Clock::now();
    local_path(parts[r].global, path, path_);
    ex_[r]->commit(seq, path_);
    const double t = seconds_since(t0);
    sum += t;
    mx = std::max(mx, t);
  }
  account(sum, mx);
}

void InProcessGroup::end() {
  for (auto& e : ex_) e->end();
}

// ---- Batched steps: replica r's slots are a SlotReplica over replica r's model.

void InProcessGroup::slot_begin(int slot, const std::vector<int32_t>& prompt, const SampleParams& sp, int rows) {
  if (slot_reps_.empty())
    for (auto& e : ex_) slot_reps_.push_back(std::make_unique<SlotReplica>(e->model()));
  for (auto& rep : slot_reps_) rep->begin(slot, prompt, sp, rows);
}

void InProcessGroup::slot_commit(int slot, const std::vector<int32_t>& seq, const std::vector<int32_t>& path,
                                 const std::vector<PlanPart>& parts) {
  for (size_t r = 0; r < slot_reps_.size(); ++r) {
    local_path(parts[r].global, path, path_);
    slot_reps_[r]->commit(slot, seq, path_);
  }
}

void InProcessGroup::slot_end(int slot) {
  for (auto& rep : slot_reps_) rep->end(slot);
}

void InProcessGroup::run_slots(const std::vector<SlotWork>& work, std::vector<PartReply>& replies) {
  const int k = size();
  LA_CHECK(static_cast<int>(slot_reps_.size()) == k, "in-process group: a batched step before any slot began");
  if (replies.size() < work.size() * k) replies.resize(work.size() * k);
  double sum = 0, mx = 0;
  for (int r = 0; r < k; ++r) {
    SlotReplica& rep = *slot_reps_[r];
    rep.clear();
    for (const SlotWork& w : work) {
      if (w.chunk > 0) rep.stage_chunk(w.slot, *w.seq, w.chunk);
      else rep.stage_part(w.slot, *w.seq, (*w.parts)[r].plan);
    }
    const double f = rep.forward();
    for (size_t i = 0; i < work.size(); ++i) {
      SlotReplica::Item& it = rep.item(static_cast<int>(i));
      PartReply& out = replies[i * k + r];
      out.cache_len = it.cache_len;
      out.step_tokens = it.step_tokens;
      out.forward_s = f;
      out.stop_signal = 0;
      out.results.swap(it.results);  // buffers trade places: no copy, no allocation once both have grown
    }
    sum += f;
    mx = std::max(mx, f);
  }
  account(sum, mx);
}



}  // namespace la
