#include "run_executor.h"

namespace la::cli {

RunExecutor make_run_executor(Comm& comm, StepModel& model, const DistOptions& dopt, const GenerateOptions& o) {
  RunExecutor e;
  e.local = std::make_unique<LocalExecutor>(model);
  e.dist = std::make_unique<DistExecutor>(comm, *e.local, dopt);
  if (o.simulate_ranks > 0)
    e.sim = std::make_unique<SimExecutor>(model, o.simulate_ranks, o.collective_latency_us * 1e-6);
  e.ranks = e.sim ? o.simulate_ranks : comm.size();
  return e;
}

}  // namespace la::cli
