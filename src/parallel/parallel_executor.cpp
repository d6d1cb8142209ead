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
