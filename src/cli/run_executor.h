// The executor that rank 0's generator drives, built in one function: its construction is what changes when the
// parallel executor changes (src/parallel/), so nothing else in src/cli builds executors.
#pragma once
#include <memory>

#include "generate_options.h"
#include "lookahead/decode/executor.h"
#include "lookahead/parallel/comm.h"
#include "lookahead/parallel/dist_executor.h"
#include "lookahead/parallel/sim_executor.h"

namespace la::cli {

struct RunExecutor {
  std::unique_ptr<LocalExecutor> local;  // rank 0's own replica
  std::unique_ptr<DistExecutor> dist;    // over the job's ranks (released by shutdown())
  std::unique_ptr<SimExecutor> sim;      // --simulate-ranks K: K replicas run in sequence in this process
  int ranks = 1;                         // ranks (or simulated replicas) a step is split over
  StepExecutor& get() { return sim ? static_cast<StepExecutor&>(*sim) : *dist; }
  // Releases the workers (after the strategy saved its state: a launcher may end the job once they exit).
  void shutdown() { dist->shutdown(); }
};

RunExecutor make_run_executor(Comm& comm, StepModel& model, const DistOptions& dopt, const GenerateOptions& o);

}  // namespace la::cli
