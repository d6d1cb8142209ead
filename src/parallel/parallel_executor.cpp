// ParallelExecutor: partition -> run parts -> merge -> account, over any ReplicaGroup (parallel_executor.h).
#include "lookahead/parallel/parallel_executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include "lookahead/util/error.h"

namespace la {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

ParallelExecutor::ParallelExecutor(ReplicaGroup& group, ParallelOptions opt)
    : group_(group), opt_(std::move(opt)), k_(group.size()), cache_len_(k_, 0), base_(k_, 0) {
  LA_CHECK(k_ >= 1, "parallel executor: no replicas");
  LA_CHECK(opt_.collective_latency_s >= 0, "simulation: collective latency must be >= 0");
  counters_.ranks = k_;
  counters_.backend = group.backend();
  counters_.collective_latency_s = opt_.collective_latency_s;
  recording_ = opt_.record_limit > 0;
  per_.resize(k_);
}

ParallelExecutor::ParallelExecutor(std::unique_ptr<ReplicaGroup> group, ParallelOptions opt)
    : ParallelExecutor(*group, std::move(opt)) {
  owned_ = std::move(group);
}

ParallelExecutor::~ParallelExecutor() {
  // Not during stack unwinding: the failure guard aborts the job then.
  if (!shut_ && std::uncaught_exceptions() == 0) {
    try {
      shutdown();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[rank 0] error: shutting the workers down: %s\n", e.what());
    }
  }
}

void ParallelExecutor::begin(const std::vector<int32_t>& prompt, const SampleParams& sp) {
  LA_CHECK(!shut_, "parallel executor: begin after shutdown");
  LA_CHECK(!prompt.empty(), "empty prompt (no tokens, not even BOS)");
  group_.begin(prompt, sp);
  std::fill(cache_len_.begin(), cache_len_.end(), static_cast<int>(prompt.size()) - 1);
  have_run_ = false;
  request_step_ = 0;
  in_request_ = true;
  ++counters_.requests;
}

void ParallelExecutor::run(const std::vector<int32_t>& seq, const StepPlan& plan, std::vector<int32_t>& results) {
  const auto t0 = Clock::now();
  LA_CHECK(in_request_, "parallel executor: run outside begin/end");
  LA_CHECK(!seq.empty() && !plan.tokens.empty() && plan.tokens[0] == seq.back(),
           "executor: plan root is not the last token");
  ++request_step_;
  const int S = static_cast<int>(seq.size());
  for (int r = 0; r < k_; ++r) base_[r] = std::max(0, S - 1 - cache_len_[r]);
  partitioner_.split(plan, k_, base_, parts_);
  run_seq_size_ = S;
  const double partition_s = since(t0);

  group_.run(seq, parts_, replies_);
  check_replies(plan);
  for (int r = 0; r < k_; ++r) per_[r].swap(replies_[r].results);
  MergeConflict c;
  const bool ok = merge_part_results(plan.size(), parts_, per_, results, owner_, &c);
  for (int r = 0; r < k_; ++r) per_[r].swap(replies_[r].results);  // the buffers go back for the next step
  LA_CHECK(ok, "ranks disagree at step ", request_step_, " of request ", counters_.requests, ": rank ", c.part,
           " computed token ", c.got, " for plan node ", c.node, " where rank ", c.other, " computed ", c.kept,
           " (replicas must give identical results: different hardware, kernels or a corrupted replica?)");
  have_run_ = true;
  account(plan, partition_s, since(t0));
}

void ParallelExecutor::check_replies(const StepPlan& plan) {
  LA_CHECK(static_cast<int>(replies_.size()) == k_, "parallel executor: ", replies_.size(), " replies for ", k_,
           " ranks");
  for (int r = 0; r < k_; ++r) {
    const PartReply& rep = replies_[r];
    LA_CHECK(rep.cache_len == cache_len_[r], "rank ", r, " is out of step at step ", request_step_, " of request ",
             counters_.requests, ": its cache holds ", rep.cache_len, " tokens, rank 0 partitioned for ",
             cache_len_[r]);
    if (rep.stop_signal != 0 && opt_.on_worker_stop) opt_.on_worker_stop(rep.stop_signal, r);
  }
}

void ParallelExecutor::account(const StepPlan& plan, double partition_s, double wall_s) {
  const GroupTimes gt = group_.last_times();
  double mx = 0, sum = 0;
  int max_tokens = 0;
  for (int r = 0; r < k_; ++r) {
    const PartReply& rep = replies_[r];
    counters_.part_nodes += parts_[r].plan.size();
    counters_.step_tokens += rep.step_tokens;
    sum += rep.forward_s;
    mx = std::max(mx, rep.forward_s);
    max_tokens = std::max(max_tokens, rep.step_tokens);
  }
  const double lat = k_ > 1 ? opt_.collective_latency_s : 0.0;
  ++counters_.steps;
  counters_.plan_nodes += plan.size();
  counters_.forward_seconds += sum;
  counters_.forward_seconds_rank0 += replies_[0].forward_s;
  counters_.max_forward_seconds += mx;
  counters_.modelled_step_seconds += mx + lat;
  counters_.partition_seconds += partition_s;
  counters_.broadcast_seconds += gt.send_s;
  counters_.gather_wait_seconds += gt.gather_wait_s;
  counters_.run_seconds += wall_s;
  last_plan_tokens_ = plan.size();
  last_max_part_tokens_ = max_tokens;
  last_wall_s_ = wall_s;
  last_max_forward_s_ = mx;
  if (recording_) {
    if ((records_.size() + 1) * static_cast<size_t>(k_) > opt_.record_limit) {
      records_.clear();  // past the limit: none at all (reports print per-step tables only for short runs)
      records_.shrink_to_fit();
      recording_ = false;
      return;
    }
    ParallelStepRecord rec;
    rec.step_tokens.resize(k_);
    rec.forward_ms.resize(k_);
    for (int r = 0; r < k_; ++r) {
      rec.step_tokens[r] = replies_[r].step_tokens;
      rec.forward_ms[r] = static_cast<float>(replies_[r].forward_s * 1e3);
    }
    records_.push_back(std::move(rec));
  }
}

void ParallelExecutor::commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) {
  LA_CHECK(in_request_ && have_run_, "parallel executor: commit without a run");
  group_.commit(seq, path, parts_);
  // Every replica's cache now holds the sequence up to the last root plus the accepted nodes its part held.
  const int target = static_cast<int>(seq.size()) - 1;
  for (int r = 0; r < k_; ++r) {
    const int held = std::max(local_path_length(parts_[r].global, path), 1);
    cache_len_[r] = std::min(target, run_seq_size_ + held - 1);
  }
  have_run_ = false;
}

void ParallelExecutor::end() {
  if (!in_request_) return;
  group_.end();
  have_run_ = false;
  in_request_ = false;
}

// The forward curve is one replica's: rank 0's own forward (every simulated replica's in process); then the part
// imbalance and, over real ranks, the time beyond the slowest forward (the collectives; the simulation has none).
void ParallelExecutor::observe_cost(StepCostModel& cost, double run_seconds) const {
  (void)run_seconds;  // the run's wall time is measured here, around the collectives
  const int fed = group_.in_process() ? k_ : 1;
  for (int r = 0; r < fed; ++r) cost.observe_forward(replies_[r].step_tokens, replies_[r].forward_s);
  if (k_ > 1 || group_.in_process()) cost.observe_parts(last_plan_tokens_, last_max_part_tokens_);
  if (k_ > 1 && !group_.in_process()) cost.observe_latency(std::max(0.0, last_wall_s_ - last_max_forward_s_));
}

// ---- Batched steps: per slot what run / commit do for one request, all slots in one group round.

ParallelExecutor::SlotState& ParallelExecutor::slot_state(int slot, const char* what) {
  LA_CHECK(slot >= 0 && slot < static_cast<int>(slots_.size()) && slots_[slot].busy, "parallel executor: ", what,
           " for slot ", slot, ", which holds no request");
  return slots_[slot];
}

void ParallelExecutor::begin_slot(int slot, const std::vector<int32_t>& prompt, const SampleParams& sp, int rows) {
  LA_CHECK(!shut_, "parallel executor: begin after shutdown");
  LA_CHECK(!prompt.empty(), "empty prompt (no tokens, not even BOS)");
  LA_CHECK(slot >= 0 && slot < SlotReplica::kMaxSlots, "parallel executor: slot ", slot, " out of range");
  if (static_cast<int>(slots_.size()) <= slot) slots_.resize(slot + 1);
  SlotState& s = slots_[slot];
  LA_CHECK(!s.busy, "parallel executor: slot ", slot, " already holds a request");
  group_.slot_begin(slot, prompt, sp, rows);
  s.busy = true;
  s.cache_len.assign(k_, 0);  // the prompt is fed by chunks or as the first step's pending chain
  if (reserved_nodes_ > 0 && s.parts.size() < static_cast<size_t>(k_)) {
    s.parts.resize(k_);
    for (PlanPart& p : s.parts) {
      p.plan.reserve(reserved_nodes_);
      p.global.reserve(static_cast<size_t>(reserved_nodes_));
    }
    s.merged.reserve(static_cast<size_t>(reserved_nodes_));
  }
  s.have_run = false;
  s.chunk = 0;
  s.steps = 0;
  s.request = static_cast<int64_t>(++counters_.requests);
}

void ParallelExecutor::reserve_partition(int plan_nodes) {
  const size_t n = static_cast<size_t>(std::max(plan_nodes, 1));
  partitioner_.reserve(plan_nodes, k_);
  per_.resize(k_);
  for (auto& v : per_) v.reserve(n);
  owner_.reserve(n);
}

void ParallelExecutor::reserve_steps(int slots, int plan_nodes) {
  reserved_nodes_ = std::max(reserved_nodes_, plan_nodes);
  const size_t n = static_cast<size_t>(std::max(plan_nodes, 1));
  reserve_partition(plan_nodes);
  const size_t replies = static_cast<size_t>(std::max(slots, 1)) * k_;
  if (slot_replies_.size() < replies) slot_replies_.resize(replies);
  for (PartReply& r : slot_replies_) r.results.reserve(n);
  work_.reserve(static_cast<size_t>(std::max(slots, 1)));
}

void ParallelExecutor::reserve_step(int rows) {
  const int n = std::max(rows, 1);
  reserve_partition(n);
  parts_.resize(k_);
  for (PlanPart& p : parts_) {
    p.plan.reserve(n);
    p.global.reserve(static_cast<size_t>(n));
  }
  replies_.resize(k_);
  for (PartReply& r : replies_) r.results.reserve(static_cast<size_t>(n));
  group_.reserve_step(2 * n);
}

int ParallelExecutor::prefill_left(int slot, const std::vector<int32_t>& seq) const {
  const SlotState& s = const_cast<ParallelExecutor*>(this)->slot_state(slot, "prefill_left");
  return std::max(0, static_cast<int>(seq.size()) - 1 - s.cache_len[0]);  // chunks reach every replica alike
}

int ParallelExecutor::stage_chunk(int slot, const std::vector<int32_t>& seq, int max_tokens) {
  SlotState& s = slot_state(slot, "a prompt chunk");
  const int c = std::min(max_tokens, prefill_left(slot, seq));
  LA_CHECK(c > 0, "parallel executor: slot ", slot, " has no prompt tokens left to prefill");
  s.chunk = c;
  work_.push_back(SlotWork{slot, &seq, c, nullptr});
  return c;
}

int ParallelExecutor::stage_plan(int slot, const std::vector<int32_t>& seq, const StepPlan& plan) {
  SlotState& s = slot_state(slot, "a plan");
  LA_CHECK(!seq.empty() && !plan.tokens.empty() && plan.tokens[0] == seq.back(),
           "executor: plan root is not the last token");
  const int S = static_cast<int>(seq.size());
  for (int r = 0; r < k_; ++r) base_[r] = std::max(0, S - 1 - s.cache_len[r]);
  partitioner_.split(plan, k_, base_, s.parts);
  s.plan_nodes = plan.size();
  s.seq_size = S;
  s.chunk = 0;
  work_.push_back(SlotWork{slot, &seq, 0, &s.parts});
  int rows = 0;
  for (int r = 0; r < k_; ++r) rows = std::max(rows, base_[r] + s.parts[r].plan.size());
  return rows;
}

void ParallelExecutor::run_staged() {
  const auto t0 = Clock::now();
  LA_CHECK(!work_.empty(), "parallel executor: a batched step with nothing staged");
  group_.run_slots(work_, slot_replies_);
  LA_CHECK(slot_replies_.size() >= work_.size() * k_, "parallel executor: ", slot_replies_.size(), " replies for ",
           work_.size(), " items on ", k_, " ranks");
  const GroupTimes gt = group_.last_times();
  double mx = 0, sum = 0;
  int max_tokens = 0, plan_tokens = 0;
  for (int r = 0; r < k_; ++r) {
    const PartReply& rep = slot_replies_[r];  // every item of a replica carries its forward and signal
    sum += rep.forward_s;
    mx = std::max(mx, rep.forward_s);
    if (rep.stop_signal != 0 && opt_.on_worker_stop) opt_.on_worker_stop(rep.stop_signal, r);
    int tokens = 0;
    for (size_t i = 0; i < work_.size(); ++i) tokens += slot_replies_[i * k_ + r].step_tokens;
    counters_.step_tokens += tokens;
    max_tokens = std::max(max_tokens, tokens);
  }
  for (size_t i = 0; i < work_.size(); ++i) {
    merge_slot(work_[i], i);
    if (work_[i].chunk == 0) plan_tokens += slots_[work_[i].slot].plan_nodes;
  }
  work_.clear();
  ++counters_.steps;
  counters_.forward_seconds += sum;
  counters_.forward_seconds_rank0 += slot_replies_[0].forward_s;
  counters_.max_forward_seconds += mx;
  counters_.modelled_step_seconds += mx + (k_ > 1 ? opt_.collective_latency_s : 0.0);
  counters_.broadcast_seconds += gt.send_s;
  counters_.gather_wait_seconds += gt.gather_wait_s;
  const double wall = since(t0);
  counters_.run_seconds += wall;
  last_plan_tokens_ = plan_tokens;
  last_max_part_tokens_ = max_tokens;
  last_wall_s_ = wall;
  last_max_forward_s_ = mx;
}

// Item i of the last round: every replica's cache length checked, then a chunk advances them all and a plan's
// parts are merged (a disagreement ends the run, as in run()).
void ParallelExecutor::merge_slot(const SlotWork& w, size_t i) {
  SlotState& s = slots_[w.slot];
  for (int r = 0; r < k_; ++r) {
    const PartReply& rep = slot_replies_[i * k_ + r];
    LA_CHECK(rep.cache_len == s.cache_len[r], "rank ", r, " is out of step in batch slot ", w.slot, " at step ",
             s.steps + 1, " of request ", s.request, ": its cache holds ", rep.cache_len,
             " tokens, rank 0 partitioned for ", s.cache_len[r]);
  }
  if (w.chunk > 0) {
    for (int r = 0; r < k_; ++r) s.cache_len[r] += w.chunk;
    return;
  }
  ++s.steps;
  for (int r = 0; r < k_; ++r) {
    per_[r].swap(slot_replies_[i * k_ + r].results);
    counters_.part_nodes += s.parts[r].plan.size();
  }
  MergeConflict c;
  const bool ok = merge_part_results(s.plan_nodes, s.parts, per_, s.merged, owner_, &c);
  for (int r = 0; r < k_; ++r) per_[r].swap(slot_replies_[i * k_ + r].results);
  LA_CHECK(ok, "ranks disagree in batch slot ", w.slot, " at step ", s.steps, " of request ", s.request, ": rank ",
           c.part, " computed token ", c.got, " for plan node ", c.node, " where rank ", c.other, " computed ",
           c.kept, " (replicas must give identical results: different hardware, kernels or a corrupted replica?)");
  counters_.plan_nodes += s.plan_nodes;
  s.have_run = true;
}

void ParallelExecutor::collect_slot(int slot, std::vector<int32_t>& results) {
  SlotState& s = slot_state(slot, "results");
  LA_CHECK(s.have_run, "parallel executor: results of slot ", slot, " without a run");
  results.assign(s.merged.begin(), s.merged.end());
}

void ParallelExecutor::commit_slot(int slot, const std::vector<int32_t>& seq, const std::vector<int32_t>& path) {
  SlotState& s = slot_state(slot, "a commit");
  LA_CHECK(s.have_run, "parallel executor: commit of slot ", slot, " without a run");
  group_.slot_commit(slot, seq, path, s.parts);
  const int target = static_cast<int>(seq.size()) - 1;
  for (int r = 0; r < k_; ++r) {
    const int held = std::max(local_path_length(s.parts[r].global, path), 1);
    s.cache_len[r] = std::min(target, s.seq_size + held - 1);
  }
  s.have_run = false;
}

void ParallelExecutor::end_slot(int slot) {
  SlotState& s = slot_state(slot, "an end");
  group_.slot_end(slot);
  s.busy = false;
  s.have_run = false;
}

void ParallelExecutor::shutdown() {
  if (shut_) return;
  shut_ = true;
  group_.shutdown();
}

ParallelCounters ParallelExecutor::counters() const {
  ParallelCounters c = counters_;
  c.bytes_sent = group_.bytes_sent();
  c.bytes_received = group_.bytes_received();
  return c;
}

double ParallelExecutor::modelled_seconds(double measured_wall_s) const {
  const double lat = k_ > 1 ? opt_.collective_latency_s * static_cast<double>(counters_.steps) : 0.0;
  return std::max(0.0, measured_wall_s - group_.sequential_excess_seconds() + lat);
}

void ParallelExecutor::reset_counters() {
  ParallelCounters fresh;
  fresh.ranks = counters_.ranks;
  fresh.backend = counters_.backend;
  fresh.collective_latency_s = counters_.collective_latency_s;
  counters_ = fresh;
  group_.reset_times();
  records_.clear();
  recording_ = opt_.record_limit > 0;
}

}  // namespace la
