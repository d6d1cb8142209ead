// K model replicas that run the parts of one step plan (lookahead parallelism), seen from rank 0. ParallelExecutor
// (parallel_executor.h) partitions, hands the parts to a group, merges and accounts; the group only moves parts
// and replies. Three groups:
//   InProcessGroup  one process, K replicas over their own KV caches run one after another (--simulate-ranks,
//                   launch/strong-scaling.sh; tests use it with hand-made replicas). group_inprocess.cpp.
//   comm group      replica r is MPI rank r: rank 0's replica runs here, the others in run_worker (worker.h).
//                   Over MPI every worker gets a message with its own part; over NCCL one broadcast holds every
//                   part (make_comm_group: src/dist, comm_group.h; messages in protocol.h).
// Batched steps (--batch with LP, the slot_* calls): every replica holds every batch slot's KV cache (a
// SlotReplica, slot_replica.h); one round runs every slot's prompt chunk (on every replica) or plan part (replica r
// its part r), each replica ONE forward over all its items.
// No libtorch, no MPI types here.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/decode/executor.h"
#include "lookahead/parallel/partition.h"
#include "lookahead/parallel/slot_replica.h"

namespace la {

// What a replica reports for its part of a step.
struct PartReply {
  int cache_len = 0;     // its cache length when it ran the part (after the previous commit)
  int step_tokens = 0;   // tokens in its forward (pending chain + part nodes - 1)
  double forward_s = 0;  // its LocalExecutor::run time
  int stop_signal = 0;   // a signal the replica's process received (0: none)
  std::vector<int32_t> results;
};

// One slot's share of a batched step, rank 0's view: a prompt chunk that every replica runs, or the slot's plan
// split into one part per replica.
struct SlotWork {
  int slot = 0;
  const std::vector<int32_t>* seq = nullptr;     // the slot's sequence
  int chunk = 0;                                 // > 0: a prompt chunk of this many tokens
  const std::vector<PlanPart>* parts = nullptr;  // chunk == 0: parts[r] for replica r
};

// Rank 0's time inside the group's collectives during the last run (0 for the in-process group).
struct GroupTimes {
  double send_s = 0;         // handing the parts out (scatter / broadcast)
  double gather_wait_s = 0;  // waiting for the replies after replica 0's own forward
};

class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  virtual int size() const = 0;
  // "mpi", "nccl" or "in-process".
  virtual std::string backend() const = 0;
  // Replicas run one after another in this process (a simulation of K devices, no real collectives).
  virtual bool in_process() const { return false; }
  // Every replica starts a request (prefill).
  virtual void begin(const std::vector<int32_t>& prompt, const SampleParams& sp) = 0;
  // Replica r runs parts[r] (parts.size() == size()) on `seq`; replies[r] is filled for every r (the vector is
  // the caller's, reused). A pending commit goes out first.
  virtual void run(const std::vector<int32_t>& seq, const std::vector<PlanPart>& parts,
                   std::vector<PartReply>& replies) = 0;
  // The accepted global path of the last run: every replica commits the nodes of it that its part held (now or,
  // on a comm group's workers, with the next run's message).
  virtual void commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path,
                      const std::vector<PlanPart>& parts) = 0;
  virtual void end() = 0;
  // ---- Batched steps. A request starts in `slot` on every replica (cache sized for `rows`); the accepted global
  // path of the slot's last parts is committed; the slot's request ends. A comm group's workers get these with
  // the next run_slots message.
  virtual void slot_begin(int slot, const std::vector<int32_t>& prompt, const SampleParams& sp, int rows);
  virtual void slot_commit(int slot, const std::vector<int32_t>& seq, const std::vector<int32_t>& path,
                           const std::vector<PlanPart>& parts);
  virtual void slot_end(int slot);
  // One round: every replica runs its share of every work item in one forward; replies[w * size() + r] is
  // replica r's for work[w] (no results for a chunk; forward_s is the replica's whole forward). The vector is the
  // caller's, reused: grown to work.size() * size() entries when shorter, never shrunk (entries past them keep
  // their buffers for a later, larger round).
  virtual void run_slots(const std::vector<SlotWork>& work, std::vector<PartReply>& replies);
  // Sizes every replica's step buffers for one request's steps of up to `rows` input rows, once (ParallelExecutor::
  // reserve_step). In process: each replica's LocalExecutor; a comm group: rank 0's replica, messages and replies,
  // and the workers' buffers through the next BEGIN (its step rows). Default: nothing.
  virtual void reserve_step(int rows) { (void)rows; }
  // Releases remote replicas for good (comm group: SHUTDOWN). Idempotent.
  virtual void shutdown() {}
  virtual GroupTimes last_times() const { return {}; }
  // Replica work done one replica after another here, summed, minus the slowest replica's share per call: what K
  // devices working at once would save (in-process group; 0 where replicas really run at once).
  virtual double sequential_excess_seconds() const { return 0; }
  virtual void reset_times() {}
  // Payload bytes rank 0 sent and received (comm group).
  virtual uint64_t bytes_sent() const { return 0; }
  virtual uint64_t bytes_received() const { return 0; }
};

// One process, K replicas run in sequence, each a LocalExecutor over its own model; replica 0 is `models[0]`.
class InProcessGroup : public ReplicaGroup {
 public:
  // The models must outlive the group; they must be independent replicas of one model (e.g. model.fork()).
  explicit InProcessGroup(std::vector<StepModel*> models);
  // `model` and k - 1 forks of it (owned here; throws if the model cannot be forked).
  InProcessGroup(StepModel& model, int k);
  ~InProcessGroup() override;
  int size() const override { return static_cast<int>(ex_.size()); }
  std::string backend() const override { return "in-process"; }
  bool in_process() const override { return true; }
  void begin(const std::vector<int32_t>& prompt, const SampleParams& sp) override;
  void run(const std::vector<int32_t>& seq, const std::vector<PlanPart>& parts,
           std::vector<PartReply>& replies) override;
  void commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path,
              const std::vector<PlanPart>& parts) override;
  void end() override;
  void slot_begin(int slot, const std::vector<int32_t>& prompt, const SampleParams& sp, int rows) override;
  void slot_commit(int slot, const std::vector<int32_t>& seq, const std::vector<int32_t>& path,
                   const std::vector<PlanPart>& parts) override;
  void slot_end(int slot) override;
  void run_slots(const std::vector<SlotWork>& work, std::vector<PartReply>& replies) override;
  void reserve_step(int rows) override;
  double sequential_excess_seconds() const override { return serial_s_ - slowest_s_; }
  void reset_times() override { serial_s_ = slowest_s_ = 0; }

 private:
  void account(double sum, double mx);

  std::vector<std::unique_ptr<StepModel>> forks_;
  std::vector<std::unique_ptr<LocalExecutor>> ex_;
  std::vector<std::unique_ptr<SlotReplica>> slot_reps_;  // batched steps: replica r's slots (made on first use)
  std::vector<int32_t> path_;  // scratch: one replica's local path
  double serial_s_ = 0, slowest_s_ = 0;
};

}  // namespace la
