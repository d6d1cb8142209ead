#include "run_executor.h"

namespace la::cli {

RunExecutor make_run_executor(Comm& comm, StepModel& model, const RankOptions& ro, const GenerateOptions& o) {
  RunExecutor e;
  e.local = std::make_unique<LocalExecutor>(model);
  e.par = make_parallel_executor(comm, *e.local, o.simulate_ranks, ro.group, ro.par);
  e.ranks = o.simulate_ranks > 0 ? o.simulate_ranks : comm.size();
  return e;
}

}  // namespace la::cli
