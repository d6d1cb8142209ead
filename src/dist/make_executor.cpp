// make_parallel_executor (comm_group.h): which executor rank 0 runs.
#include "lookahead/dist/comm_group.h"
#include "lookahead/util/error.h"

namespace la {

std::unique_ptr<ParallelExecutor> make_parallel_executor(Comm& comm, LocalExecutor& local, int simulate_ranks,
                                                         const CommGroupOptions& group_opt, ParallelOptions opt) {
  if (simulate_ranks > 0) {
    LA_CHECK(comm.size() == 1, "--simulate-ranks runs in one process; this job has ", comm.size(), " ranks");
    return std::make_unique<ParallelExecutor>(std::make_unique<InProcessGroup>(local.model(), simulate_ranks),
                                              std::move(opt));
  }
  if (comm.size() == 1) return nullptr;  // one rank: LocalExecutor itself, no partitioning
  return std::make_unique<ParallelExecutor>(make_comm_group(comm, local, group_opt), std::move(opt));
}

}  // namespace la
