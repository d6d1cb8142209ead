// Lookahead parallelism simulated in one process (launch/strong-scaling.sh on a machine with fewer devices than
// ranks). SimExecutor splits every plan exactly as DistExecutor does (partition_plan(plan, K, base) with base[r]
// the tokens replica r must re-feed), runs the K parts one after another, each on its own LocalExecutor over its
// own KV cache (replica 0 is the given model, replicas 1..K-1 are model.fork(): shared weights, own caches),
// times each part's forward, merges the results with merge_part_results and commits every replica with the
// accepted path mapped to its part (local_path). Outputs are therefore those of a real K-rank job.
//
// The model of a K-device step (K > 1):   modelled step = max_r forward_r + collective latency
// where forward_r is replica r's LocalExecutor::run time measured here and the collective latency is a constant
// passed in (one RUN round trip: rank 0's scatter of the parts plus the gather of the replies beyond the slowest
// forward; launch/strong-scaling.sh measures it with a real 2-rank MPI job). With K == 1 there is no collective.
// For end-to-end numbers, modelled_seconds(wall) replaces in a measured wall time the replicas' work run in
// sequence here (prefill, forwards, commits) by the slowest replica's work per call, and adds the latency per
// step: everything else (drafting, partitioning, merging, verification on rank 0) is kept as measured.
// On CUDA the forward returns host ids, so it synchronises and the host timer is correct.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "lookahead/decode/executor.h"
#include "lookahead/parallel/partition.h"

namespace la {

// One step of the simulation.
struct SimStepRecord {
  int plan_nodes = 0;
  std::vector<int32_t> part_nodes;   // per rank: plan nodes in its part (root included)
  std::vector<int32_t> step_tokens;  // per rank: tokens in its forward (pending chain + part nodes - 1)
  std::vector<float> forward_ms;     // per rank: LocalExecutor::run time
  float max_forward_ms = 0;
  float modelled_ms = 0;             // max_forward_ms + collective latency (K > 1)
  float wall_ms = 0;                 // the whole SimExecutor::run here (K forwards in sequence)
};

struct SimCounters {
  int ranks = 1;
  double collective_latency_s = 0;
  uint64_t requests = 0;
  uint64_t steps = 0;
  uint64_t plan_nodes = 0;          // sum over steps
  uint64_t part_nodes = 0;          // sum over steps and ranks (root included per part)
  uint64_t step_tokens = 0;         // sum over steps and ranks of forward tokens
  uint64_t disagreements = 0;       // duplicated nodes whose results differed between replicas (should stay 0)
  double forward_seconds = 0;       // sum over steps and ranks: the forwards as run here, in sequence
  double max_forward_seconds = 0;   // sum over steps of the slowest rank's forward
  double modelled_step_seconds = 0; // sum over steps of (max forward + collective latency)
  double run_seconds = 0;           // sum of SimExecutor::run wall time
  double replica_seconds = 0;       // all replica work here (prefill, forwards, commits), in sequence
  double replica_max_seconds = 0;   // sum over calls of the slowest replica's work (what K devices would take)
};

class SimExecutor : public StepExecutor {
 public:
  // `model` becomes replica 0 (it must outlive this object); k - 1 forks of it are made (throws if it cannot be
  // forked). collective_latency_s: added per step when k > 1.
  SimExecutor(StepModel& model, int k, double collective_latency_s = 0, bool record_steps = true);
  ~SimExecutor() override;
  void begin(const std::vector<int32_t>& prompt, const SampleParams& sp) override;
  void run(const std::vector<int32_t>& seq, const StepPlan& plan, std::vector<int32_t>& results) override;
  void commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) override;
  void end() override;
  // Every replica times its forwards into `cost` (same hardware); each step also feeds the part imbalance.
  void set_cost_model(StepCostModel* cost) override;

  int ranks() const { return k_; }
  const std::vector<SimStepRecord>& steps() const { return records_; }
  void clear_steps() { records_.clear(); }
  const SimCounters& counters() const { return counters_; }
  // A wall time measured around this executor's use (since construction or reset_counters()), with the
  // sequential replica work replaced by the slowest replica's work per call plus the latency per step (K > 1).
  double modelled_seconds(double measured_wall_s) const;
  void reset_counters();

 private:
  void account(const std::vector<double>& per_rank_s);

  int k_;
  bool record_;
  std::vector<std::unique_ptr<StepModel>> forks_;  // replicas 1..k-1
  std::vector<std::unique_ptr<LocalExecutor>> ex_;  // k executors
  std::vector<PlanPart> parts_;
  bool in_request_ = false;
  std::vector<SimStepRecord> records_;
  SimCounters counters_;
  StepCostModel* cost_ = nullptr;
};

}  // namespace la
