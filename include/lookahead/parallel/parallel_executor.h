// Lookahead parallelism, rank 0's side: every replica holds a full model; rank 0 owns the strategies and the
// generation loop and drives a ParallelExecutor over a ReplicaGroup (replica_group.h). Strategies never see the
// rank count. One step:
//   partition  partition_plan(plan, K, base), base[r] = the tokens replica r must re-feed (its pending chain
//              beyond the root), from the cache length replica r will have after the last commit: the cache up
//              to the last root plus the accepted nodes its part held (local_path_length).
//   run parts  the group runs part r on replica r; every reply carries the replica's own cache length, which
//              must equal the one rank 0 partitioned for (else: error naming the rank and the step).
//   merge      merge_part_results; a node computed by several replicas with different results ends the run with
//              an error naming both ranks, the node and the step.
//   account    bounded counters (ParallelCounters); per-step records only when ParallelOptions asks for them.
// With one rank and no simulation the CLI uses LocalExecutor directly (make_parallel_executor returns null).
//
// Batched steps (SlotExecutor, executor.h: BatchRunner with --batch N under LP): the same per slot. Every replica
// holds every slot's cache; rank 0 keeps each slot's per-replica cache lengths, splits each decoding slot's plan
// with its own bases, and one group round (run_slots: one message out and one reply per worker) runs every slot's
// prompt chunk (all replicas) and part (replica r its part r); each replica ONE forward over all its items. Then
// each slot's parts are merged and checked as above, and its commit goes out with the next round.
//
// Failure handling of a real job (guard.h): any exception on any rank prints "[rank R] error: <message>" and
// aborts the MPI job. A rank killed outright is detected by mpirun / srun (measured here: mpirun 1.1 s, srun
// 0.2 s); a rank that hangs while alive is caught by the reply timeout (CommGroupOptions::rank_timeout_s).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/decode/executor.h"
#include "lookahead/parallel/partition.h"
#include "lookahead/parallel/replica_group.h"

namespace la {

struct ParallelOptions {
  // Keep per-step records (steps()) for at most this many rank entries (steps x ranks); 0: none. Once the limit
  // is passed the records are dropped and no more are kept, so memory stays bounded.
  size_t record_limit = 0;
  // Added per step to the slowest forward in the modelled step time (in-process group, K > 1).
  double collective_latency_s = 0;
  // Called for every reply that carries a stop signal (a signal that reached only some ranks).
  std::function<void(int signal, int rank)> on_worker_stop;
};

// One step as rank 0 saw it (only with ParallelOptions::record_limit).
struct ParallelStepRecord {
  std::vector<int32_t> step_tokens;  // per rank: tokens in its forward (pending chain + part nodes - 1)
  std::vector<float> forward_ms;     // per rank: LocalExecutor::run time
};

struct ParallelCounters {
  int ranks = 1;
  std::string backend;
  double collective_latency_s = 0;
  uint64_t requests = 0;
  uint64_t steps = 0;
  uint64_t plan_nodes = 0;          // sum over steps
  uint64_t part_nodes = 0;          // sum over steps and ranks (root included per part): duplication = this / plan
  uint64_t step_tokens = 0;         // sum over steps and ranks of forward tokens
  double forward_seconds = 0;       // sum over steps and ranks
  double forward_seconds_rank0 = 0;
  double max_forward_seconds = 0;   // sum over steps of the slowest rank's forward
  double modelled_step_seconds = 0; // sum over steps of (slowest forward + collective latency when K > 1)
  double partition_seconds = 0;     // partition_plan (and, for a comm group, nothing else)
  double broadcast_seconds = 0;     // rank 0 handing the parts out
  double gather_wait_seconds = 0;   // rank 0 waiting for replies after its own forward
  double run_seconds = 0;           // sum of run() wall time
  uint64_t bytes_sent = 0;          // rank 0 (comm group)
  uint64_t bytes_received = 0;
};

class ParallelExecutor : public StepExecutor, public SlotExecutor {
 public:
  // The group must outlive this object.
  ParallelExecutor(ReplicaGroup& group, ParallelOptions opt = {});
  // Owns its group.
  ParallelExecutor(std::unique_ptr<ReplicaGroup> group, ParallelOptions opt = {});
  ~ParallelExecutor() override;
  void begin(const std::vector<int32_t>& prompt, const SampleParams& sp) override;
  // results: resized to plan.size() and filled (the caller's buffer, reused across steps).
  void run(const std::vector<int32_t>& seq, const StepPlan& plan, std::vector<int32_t>& results) override;
  void commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) override;
  void end() override;
  // Every replica times its forwards into `cost`; each step also feeds the part imbalance and, over real ranks,
  // the latency (the step's wall time beyond its slowest forward).
  void observe_cost(StepCostModel& cost, double run_seconds) const override;
  // Releases remote replicas (comm group). Idempotent; nothing may be run afterwards.
  void shutdown();

  // ---- Batched steps (SlotExecutor).
  void begin_slot(int slot, const std::vector<int32_t>& prompt, const SampleParams& sp, int rows) override;
  int prefill_left(int slot, const std::vector<int32_t>& seq) const override;
  int stage_chunk(int slot, const std::vector<int32_t>& seq, int max_tokens) override;
  int stage_plan(int slot, const std::vector<int32_t>& seq, const StepPlan& plan) override;
  void run_staged() override;
  void collect_slot(int slot, std::vector<int32_t>& results) override;
  void commit_slot(int slot, const std::vector<int32_t>& seq, const std::vector<int32_t>& path) override;
  void end_slot(int slot) override;
  // The partitioner, every slot's parts and merge, the replies (an in-process group: also its replicas' step
  // buffers, sized by each slot's rows at begin_slot).
  void reserve_steps(int slots, int plan_nodes) override;
  // One request's steps (StepExecutor::reserve_step, the step runner's largest plan): the partitioner, the parts,
  // the replies and the merge, and each replica's step buffers (ReplicaGroup::reserve_step: the plan's rows and as
  // many re-fed pending tokens, a replica's part holding at most the whole plan and its pending chain at most the
  // last accepted path).
  void reserve_step(int rows) override;

  int ranks() const { return k_; }
  bool simulated() const { return group_.in_process(); }
  const std::vector<ParallelStepRecord>& steps() const { return records_; }
  ParallelCounters counters() const;
  // A wall time measured around this executor's use (since construction or reset_counters()), with the replica
  // work run one after another here (in-process group) replaced by the slowest replica's work per call, plus the
  // collective latency per step (K > 1).
  double modelled_seconds(double measured_wall_s) const;
  void reset_counters();

 private:
  void check_replies(const StepPlan& plan);
  struct SlotState {
    bool busy = false;
    std::vector<int> cache_len;    // per replica: the slot's cache length after its last commit or chunk
    std::vector<PlanPart> parts;   // the staged plan's parts (buffers reused)
    std::vector<int32_t> merged;   // its merged results
    int plan_nodes = 0, seq_size = 0, chunk = 0;
    int64_t request = 0;           // the request number (named in errors)
    int steps = 0;                 // decode steps of the slot's request
    bool have_run = false;
  };
  SlotState& slot_state(int slot, const char* what);
  // What one request's steps and batched steps share: the partitioner and the merge's scratch.
  void reserve_partition(int plan_nodes);
  void merge_slot(const SlotWork& w, size_t i);
  void account(const StepPlan& plan, double partition_s, double wall_s);

  std::unique_ptr<ReplicaGroup> owned_;
  ReplicaGroup& group_;
  ParallelOptions opt_;
  int k_;
  bool in_request_ = false;
  bool have_run_ = false;
  int request_step_ = 0;  // steps run in this request (named in errors)
  bool shut_ = false;
  int run_seq_size_ = 0;
  std::vector<int> cache_len_;  // per replica: its cache length after the last commit
  std::vector<int> base_;       // scratch: re-feed per replica
  Partitioner partitioner_;
  std::vector<PlanPart> parts_;
  std::vector<PartReply> replies_;
  std::vector<std::vector<int32_t>> per_;  // scratch: results per part (swapped with the replies', no copy)
  std::vector<int32_t> owner_;             // scratch for the merge
  std::vector<ParallelStepRecord> records_;
  std::vector<SlotState> slots_;      // batched steps: per slot
  std::vector<SlotWork> work_;        // the staged round (reused)
  std::vector<PartReply> slot_replies_;  // its replies, [work * K + replica] (reused, never shrunk)
  int reserved_nodes_ = 0;               // reserve_steps(): every slot's parts and merge are sized for this
  bool recording_ = false;
  ParallelCounters counters_;
  int last_plan_tokens_ = 0, last_max_part_tokens_ = 0;  // the last run, for observe_cost
  double last_wall_s_ = 0, last_max_forward_s_ = 0;
};

}  // namespace la
