// The executor that rank 0's generator drives, built in one function: its construction is what changes when the
// parallel executor changes (src/parallel/, src/dist/), so nothing else in src/cli builds executors.
#pragma once
#include <memory>

#include "generate_options.h"
#include "lookahead/decode/executor.h"
#include "lookahead/dist/comm.h"
#include "lookahead/dist/comm_group.h"
#include "run_setup.h"

namespace la::cli {

struct RunExecutor {
  std::unique_ptr<LocalExecutor> local;   // rank 0's own replica (the executor itself with one rank)
  std::unique_ptr<ParallelExecutor> par;  // over the job's ranks or --simulate-ranks K replicas in this process;
                                          // null with one rank and no simulation (destroyed before `local`)
  int ranks = 1;                          // ranks (or simulated replicas) a step is split over
  StepExecutor& get() { return par ? static_cast<StepExecutor&>(*par) : *local; }
  // The simulation (--simulate-ranks), or null.
  const ParallelExecutor* sim() const { return par && par->simulated() ? par.get() : nullptr; }
  // Releases the workers (after the strategy saved its state: a launcher may end the job once they exit).
  void shutdown() {
    if (par) par->shutdown();
  }
};

RunExecutor make_run_executor(Comm& comm, StepModel& model, const RankOptions& ro, const GenerateOptions& o);

}  // namespace la::cli
