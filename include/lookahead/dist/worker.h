// Ranks > 0 of a lookahead-parallel job: serve rank 0's comm group (comm_group.h) until SHUTDOWN. Messages in
// protocol.h.
#pragma once
#include "lookahead/decode/executor.h"
#include "lookahead/dist/comm.h"
#include "lookahead/dist/comm_group.h"

namespace la {

// Waits for rank 0 without a limit (rank 0 may idle between requests). A signal delivered to a worker only sets
// *opt.stop_signal: the worker keeps serving and reports it in its next reply, so rank 0 stops the job cleanly.
// Throws la::Error on protocol or model errors (the failure guard, guard.h, turns that into a job abort).
void run_worker(Comm& comm, LocalExecutor& local, const CommGroupOptions& opt = {});

}  // namespace la
