// The replica group over a communicator's ranks (rank 0's side: group_comm.cpp; the workers: worker.h) and the
// executor rank 0 runs (make_executor.cpp): the MPI/NCCL half of lookahead parallelism over src/parallel's
// partitioner, protocol and ParallelExecutor. No libtorch, no MPI types here.
#pragma once
#include <atomic>
#include <memory>

#include "lookahead/dist/comm.h"
#include "lookahead/parallel/parallel_executor.h"
#include "lookahead/parallel/replica_group.h"

namespace la {

// Options of a comm group's workers and rank 0.
struct CommGroupOptions {
  // Rank 0 gives up on a rank that has not replied this many seconds after rank 0 finished its own part of a
  // step (or has not taken a broadcast). 0: wait forever. CLI: --rank-timeout.
  double rank_timeout_s = 60;
  // Clean stop on a signal that reached only some ranks: workers put *stop_signal (one relaxed load; 0: none)
  // into every reply (rank 0 learns it from PartReply::stop_signal).
  const std::atomic<int>* stop_signal = nullptr;
};

// Rank 0 of `comm` (which must outlive the group), with `local` as replica 0; the others run run_worker.
std::unique_ptr<ReplicaGroup> make_comm_group(Comm& comm, LocalExecutor& local, const CommGroupOptions& opt);

// Rank 0's executor for the CLI. Null when there is one rank and no simulation: use `local` directly. Otherwise a
// ParallelExecutor over the in-process group (simulate_ranks > 0: `local`'s model and simulate_ranks - 1 forks;
// comm must have one rank) or over the comm's ranks; it owns its group.
std::unique_ptr<ParallelExecutor> make_parallel_executor(Comm& comm, LocalExecutor& local, int simulate_ranks,
                                                         const CommGroupOptions& group_opt, ParallelOptions opt);

}  // namespace la
