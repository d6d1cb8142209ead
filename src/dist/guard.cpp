// The failure guard (guard.h).
#include "lookahead/dist/guard.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "lookahead/dist/comm.h"

namespace la {

int dist_main_guard(const std::function<int()>& body, const std::string& program,
                    const std::vector<int>& clean_codes) {
  auto world = [] {
    const int m = mpi_world_size();
    return m > 0 ? m : launcher_size();
  };
  auto rank = [] {
    const int r = mpi_world_rank();
    return r >= 0 ? r : launcher_rank();
  };
  int rc = 1;
  std::string err;
  try {
    if (launcher_size() > 1) mpi_init();
    rc = body();
  } catch (const std::exception& e) {
    err = e.what();
    if (err.empty()) err = "unknown error";
  } catch (...) {
    err = "unknown exception";
  }
  std::fflush(stdout);
  const bool multi = world() > 1;
  if (!err.empty()) {
    if (multi) std::fprintf(stderr, "[rank %d] error: %s\n", rank(), err.c_str());
    else std::fprintf(stderr, "%s%serror: %s\n", program.c_str(), program.empty() ? "" : ": ", err.c_str());
    std::fflush(stderr);
    if (multi) mpi_abort(1);
    mpi_finalize();
    return 1;
  }
  const bool clean = std::find(clean_codes.begin(), clean_codes.end(), rc) != clean_codes.end();
  if (rc != 0 && multi && !clean) {
    std::fprintf(stderr, "[rank %d] exiting with status %d; ending the job\n", rank(), rc);
    std::fflush(stderr);
    mpi_abort(rc);
  }
  mpi_finalize();
  return rc;
}

}  // namespace la
