// The failure guard of a (possibly multi-rank) command: no failure may hang the job.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace la {

// Runs a (possibly distributed) command and never lets a failure hang the job. How the CLI uses it:
//
//   int main(int argc, char** argv) {
//     return la::dist_main_guard([&] {
//       ... parse options ...
//       auto comm = la::make_comm(opt.comm, opt.device);        // before the executor (destroyed after it)
//       ... load the model on device la::rank_cuda_device(comm->local_rank()) ...
//       la::check_agreement(*comm, model.checksum(), params_string);     // agreement.h
//       la::LocalExecutor local(model);
//       if (comm->rank() != 0) { la::run_worker(*comm, local, gopt); return 0; }   // worker.h
//       auto par = la::make_parallel_executor(*comm, local, 0, gopt, {}); // parallel_executor.h; null: one rank
//       ... generation loop, outputs (flush them) ...
//       if (par) par->shutdown();
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
