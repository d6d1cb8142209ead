// Lookahead parallelism over MPI ranks: every rank holds a full model replica; rank 0 owns the strategies and the
// generation loop and drives a DistExecutor; ranks > 0 sit in run_worker. Strategies never see the rank count.
//
// Protocol. Rank 0 sends one command message per call: over MPI a point-to-point message to each worker holding
// only that worker's part; over NCCL (every rank has its own GPU) one broadcast holding every part.
//   [magic, command, sequence number, ...payload]                          (int32 words)
//   BEGIN    : seq sync (the prompt), SampleParams          -> every rank: LocalExecutor::begin (prefill)
//   RUN      : commit section of the previous step (seq sync with the accepted tokens + the accepted global path,
//              or "none"), seq sync, K, the included parts as (rank, size, tokens, local parents, verify flags,
//              global ids)                                   -> every rank: commit (path mapped to its part; nodes
//              it does not hold end the prefix), then LocalExecutor::run on its part, then a reply to rank 0:
//              [sequence number, cache length before, forward tokens, forward microseconds, stop signal
//              (0, or the SIGINT/SIGTERM this worker received), results...]
//              gathered on rank 0 (MPI), merged (merge_part_results) and returned for verification.
//   END      : the request ended                             -> LocalExecutor::end
//   SHUTDOWN : leave run_worker
// A "seq sync" is [kept prefix length, new token count, new tokens...] against the sequence the workers hold, so a
// step usually carries only the accepted tokens. The accepted tokens and path of step t are broadcast with the
// RUN of step t+1 (one message out + one reply per worker and step); rank 0 commits its own replica at once.
// Partitioning: partition_plan(plan, K, base) with base[r] = the tokens rank r must re-feed (its pending chain
// beyond the root), predicted on rank 0 from the commit rule and corrected by the replies. Part r goes to rank r.
//
// Failure handling. Wrap the whole command in dist_main_guard: any exception on any rank prints
// "[rank R] error: <message>" and calls MPI_Abort(MPI_COMM_WORLD, 1); mpirun (or srun --kill-on-bad-exit) then
// kills the other ranks, so the job ends non-zero at once. A rank killed outright (kill -9, OOM) is detected by
// mpirun / srun, which ends the job naming the rank (measured here: mpirun 1.1 s, srun 0.2 s; a bad model path on
// one rank: 1.2 s). A rank that hangs while alive (e.g. SIGSTOP) is
// caught on rank 0 by the reply timeout (DistOptions::rank_timeout_s, measured from the moment rank 0 finished
// its own share of the step), which throws an error naming the silent ranks.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lookahead/decode/executor.h"
#include "lookahead/parallel/comm.h"
#include "lookahead/parallel/partition.h"

namespace la {

struct DistOptions {
  // Rank 0 gives up on a rank that has not replied this many seconds after rank 0 finished its own part of a
  // step (or has not taken a broadcast). 0: wait forever. CLI: --rank-timeout.
  double rank_timeout_s = 60;
  // Keep one DistStepRecord per step (steps(); about 200 bytes a step, so off by default: a long job would grow
  // without bound; counters() has the totals).
  bool record_steps = false;
  // Clean stop on a signal that reached only some ranks. Workers put *stop_signal (one relaxed load; 0: none)
  // into every RUN reply; rank 0 calls on_worker_stop(signal, rank) for every reply that carries one.
  const std::atomic<int>* stop_signal = nullptr;
  std::function<void(int signal, int rank)> on_worker_stop;
};

// One step as rank 0 saw it.
struct DistStepRecord {
  int plan_nodes = 0;
  std::vector<int32_t> part_nodes;    // per rank: plan nodes in its part (root included)
  std::vector<int32_t> step_tokens;   // per rank: tokens in its forward (pending chain + part nodes - 1)
  std::vector<float> forward_ms;      // per rank: LocalExecutor::run time
  float partition_ms = 0;             // partition_plan + message encoding on rank 0
  float broadcast_ms = 0;             // rank 0 inside the command broadcast
  float gather_wait_ms = 0;           // rank 0 waiting for the replies after its own forward
  float wall_ms = 0;                  // the whole DistExecutor::run
};

struct DistCounters {
  int ranks = 1;
  std::string backend;
  uint64_t requests = 0;
  uint64_t steps = 0;
  uint64_t plan_nodes = 0;        // sum over steps
  uint64_t part_nodes = 0;        // sum over steps and ranks (root included per part): duplication = this / plan
  uint64_t step_tokens = 0;       // sum over steps and ranks of forward tokens
  uint64_t disagreements = 0;     // duplicated nodes whose results differed between ranks (should stay 0)
  uint64_t cache_mispredictions = 0;
  double forward_seconds_rank0 = 0;
  double max_forward_seconds = 0;   // sum over steps of the slowest rank's forward
  double partition_seconds = 0;
  double broadcast_seconds = 0;     // rank 0, command broadcasts
  double gather_wait_seconds = 0;   // rank 0, waiting for replies after its own forward
  double run_seconds = 0;           // sum of DistExecutor::run wall time
  uint64_t bytes_sent = 0;          // rank 0 (broadcast payloads + point-to-point)
  uint64_t bytes_received = 0;      // rank 0 (replies)
};

class DistExecutor : public StepExecutor {
 public:
  // `local` is rank 0's own replica. The comm must outlive this object (declare it first).
  DistExecutor(Comm& comm, LocalExecutor& local, DistOptions opt = {});
  // Sends SHUTDOWN if shutdown() was not called (not during stack unwinding: the guard aborts the job then).
  ~DistExecutor() override;
  void begin(const std::vector<int32_t>& prompt, const SampleParams& sp) override;
  void run(const std::vector<int32_t>& seq, const StepPlan& plan, std::vector<int32_t>& results) override;
  void commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) override;
  void end() override;
  // Rank 0's replica times its forwards into `cost`; each step also feeds the part imbalance and the latency
  // (the step's wall time beyond its slowest forward).
  void set_cost_model(StepCostModel* cost) override {
    cost_ = cost;
    local_.set_cost_model(cost);
  }
  // Releases the workers from run_worker. Idempotent; nothing may be run afterwards.
  void shutdown();

  const std::vector<DistStepRecord>& steps() const { return records_; }
  void clear_steps() { records_.clear(); }
  DistCounters counters() const;

 private:
  std::vector<int32_t> header(int cmd);
  void sync_seq(const std::vector<int32_t>& seq, std::vector<int32_t>& msg);
  void send_command(std::vector<int32_t>& msg);

  Comm& comm_;
  LocalExecutor& local_;
  DistOptions opt_;
  int k_ = 1;
  bool per_rank_ = true;  // MPI: every worker gets its own message; NCCL: one broadcast with every part
  std::vector<std::vector<int32_t>> per_rank_msgs_;
  int32_t msg_no_ = 0;
  bool shut_ = false;
  bool in_request_ = false;
  std::vector<int32_t> sent_seq_;       // the sequence the workers hold
  std::vector<PlanPart> parts_;         // the last run's parts
  int run_seq_size_ = 0;                // seq size at the last run
  std::vector<int> cache_len_;          // predicted cache length per rank
  bool have_commit_ = false;            // a commit waiting to go out with the next RUN
  std::vector<int32_t> commit_seq_, commit_path_;
  std::vector<DistStepRecord> records_;
  DistCounters counters_;
  StepCostModel* cost_ = nullptr;
};

// Ranks > 0: serves rank 0's DistExecutor until SHUTDOWN. Throws la::Error on protocol or model errors (let
// dist_main_guard turn that into a job abort).
void run_worker(Comm& comm, LocalExecutor& local, const DistOptions& opt = {});

// Startup check, collective: every rank compares its model checksum and its parameter string (whatever must be
// identical on all ranks: model, dtype, sampling, strategy options...) with rank 0's. Throws la::Error naming
// the rank(s) that differ, on every rank.
void check_agreement(Comm& comm, uint64_t model_checksum, const std::string& params);

// Runs a (possibly distributed) command and never lets a failure hang the job. How the CLI uses it:
//
//   int main(int argc, char** argv) {
//     return la::dist_main_guard([&] {
//       ... parse options ...
//       auto comm = la::make_comm(opt.comm, opt.device);        // before the executor (destroyed after it)
//       ... load the model on device la::rank_cuda_device(comm->local_rank()) ...
//       la::check_agreement(*comm, model.checksum(), params_string);
//       la::LocalExecutor local(model);
//       if (comm->rank() != 0) { la::run_worker(*comm, local, dopt); return 0; }
//       la::DistExecutor ex(*comm, local, dopt);
//       ... generation loop, outputs (flush them) ...
//       ex.shutdown();
//       return 0;
//     });
//   }
//
// Behaviour: when launched by mpirun/srun with more than one rank it initialises MPI first (so every failure can
// abort the job, whatever the order of option parsing, model loading and make_comm in `body`). If `body` throws,
// it prints one line to stderr: "[rank R] error: <what>" in a multi-rank job, "<program>: error: <what>" in a
// one-process run; if `body` returns non-zero in a multi-rank job it prints "[rank R] exiting with status N"
// (body may print its own messages and return non-zero, e.g. 2 for usage errors). A multi-rank job is then
// ended with MPI_Abort(status) (the launcher kills every rank; mpirun exits non-zero); a one-process run returns
// 1 (or N). On success MPI is finalised (if it was initialised) and body's status returned. stdout is flushed.
// A status listed in `clean_codes` (the CLI's interrupted exits 130/143, returned by rank 0 after it released the
// workers) is treated like success: MPI is finalised, no abort, and the status is returned.
int dist_main_guard(const std::function<int()>& body, const std::string& program = "lookahead",
                    const std::vector<int>& clean_codes = {});

}  // namespace la
