// SimExecutor: lookahead parallelism over K replicas in one process, run in sequence and timed (see
// sim_executor.h for the model of a K-device step).
#include "lookahead/parallel/sim_executor.h"

#include <algorithm>
#include <chrono>

#include "lookahead/util/error.h"

namespace la {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

SimExecutor::SimExecutor(StepModel& model, int k, double collective_latency_s, bool record_steps)
    : k_(k), record_(record_steps) {
  LA_CHECK(k >= 1, "simulation: rank count must be >= 1 (got ", k, ")");
  LA_CHECK(collective_latency_s >= 0, "simulation: collective latency must be >= 0");
  ex_.push_back(std::make_unique<LocalExecutor>(model));
  for (int r = 1; r < k; ++r) {
    auto m = model.fork();
    LA_CHECK(m != nullptr, "simulation: the model (", model.describe(), ") cannot be forked into replicas");
    ex_.push_back(std::make_unique<LocalExecutor>(*m));
    forks_.push_back(std::move(m));
  }
  counters_.ranks = k;
  counters_.collective_latency_s = collective_latency_s;
}

SimExecutor::~SimExecutor() {
  ex_.clear();  // the executors refer to the forks
}

void SimExecutor::account(const std::vector<double>& per_rank_s) {
  double sum = 0, mx = 0;
  for (double s : per_rank_s) {
    sum += s;
    mx = std::max(mx, s);
  }
  counters_.replica_seconds += sum;
  counters_.replica_max_seconds += mx;
}

void SimExecutor::begin(const std::vector<int32_t>& prompt, const SampleParams& sp) {
  LA_CHECK(!prompt.empty(), "empty prompt (no tokens, not even BOS)");
  std::vector<double> t(k_);
  for (int r = 0; r < k_; ++r) {
    const auto t0 = Clock::now();
    ex_[r]->begin(prompt, sp);
    t[r] = since(t0);
  }
  account(t);
  parts_.clear();
  in_request_ = true;
  ++counters_.requests;
}

void SimExecutor::run(const std::vector<int32_t>& seq, const StepPlan& plan, std::vector<int32_t>& results) {
  const auto t0 = Clock::now();
  LA_CHECK(in_request_, "SimExecutor: run outside begin/end");
  LA_CHECK(!seq.empty() && !plan.tokens.empty() && plan.tokens[0] == seq.back(),
           "executor: plan root is not the last token");
  const int S = static_cast<int>(seq.size());
  SimStepRecord rec;
  rec.plan_nodes = plan.size();
  rec.part_nodes.assign(k_, 0);
  rec.step_tokens.assign(k_, 0);
  rec.forward_ms.assign(k_, 0.f);

  std::vector<double> f(k_, 0.0);
  if (k_ == 1) {
    parts_.assign(1, PlanPart{plan, {}});
    const auto tf = Clock::now();
    ex_[0]->run(seq, plan, results);
    f[0] = since(tf);
    rec.part_nodes[0] = plan.size();
    rec.step_tokens[0] = ex_[0]->last_step_tokens();
  } else {
    // The same split as DistExecutor, with the exact re-feed of every replica (DistExecutor predicts it).
    std::vector<int> base(k_);
    for (int r = 0; r < k_; ++r) base[r] = std::max(0, S - 1 - ex_[r]->model().cache_len());
    parts_ = partition_plan(plan, k_, base);
    std::vector<std::vector<int32_t>> per(k_);
    for (int r = 0; r < k_; ++r) {
      const auto tf = Clock::now();
      ex_[r]->run(seq, parts_[r].plan, per[r]);
      f[r] = since(tf);
      rec.part_nodes[r] = parts_[r].plan.size();
      rec.step_tokens[r] = ex_[r]->last_step_tokens();
    }
    int dis = 0;
    results = merge_part_results(plan.size(), parts_, per, &dis);
    counters_.disagreements += dis;
  }
  double mx = 0, sum = 0;
  for (int r = 0; r < k_; ++r) {
    rec.forward_ms[r] = static_cast<float>(f[r] * 1e3);
    mx = std::max(mx, f[r]);
    sum += f[r];
    counters_.part_nodes += rec.part_nodes[r];
    counters_.step_tokens += rec.step_tokens[r];
  }
  const double lat = k_ > 1 ? counters_.collective_latency_s : 0.0;
  if (cost_) cost_->observe_parts(plan.size(), *std::max_element(rec.step_tokens.begin(), rec.step_tokens.end()));
  rec.max_forward_ms = static_cast<float>(mx * 1e3);
  rec.modelled_ms = static_cast<float>((mx + lat) * 1e3);
  rec.wall_ms = static_cast<float>(since(t0) * 1e3);
  ++counters_.steps;
  counters_.plan_nodes += plan.size();
  counters_.forward_seconds += sum;
  counters_.max_forward_seconds += mx;
  counters_.modelled_step_seconds += mx + lat;
  counters_.run_seconds += rec.wall_ms * 1e-3;
  account(f);
  if (record_) records_.push_back(std::move(rec));
}

void SimExecutor::commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) {
  LA_CHECK(in_request_ && !parts_.empty(), "SimExecutor: commit without a run");
  std::vector<double> t(k_);
  for (int r = 0; r < k_; ++r) {
    const auto t0 = Clock::now();
    ex_[r]->commit(seq, k_ == 1 ? path : local_path(parts_[r], path));
    t[r] = since(t0);
  }
  account(t);
}

void SimExecutor::end() {
  if (!in_request_) return;
  for (auto& e : ex_) e->end();
  in_request_ = false;
}

void SimExecutor::set_cost_model(StepCostModel* cost) {
  cost_ = cost;
  for (auto& e : ex_) e->set_cost_model(cost);
}

double SimExecutor::modelled_seconds(double measured_wall_s) const {
  const double lat = k_ > 1 ? counters_.collective_latency_s * static_cast<double>(counters_.steps) : 0.0;
  return std::max(0.0, measured_wall_s - counters_.replica_seconds + counters_.replica_max_seconds + lat);
}

void SimExecutor::reset_counters() {
  const double lat = counters_.collective_latency_s;
  counters_ = SimCounters{};
  counters_.ranks = k_;
  counters_.collective_latency_s = lat;
  records_.clear();
}

}  // namespace la
