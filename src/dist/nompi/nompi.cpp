// Builds without MPI (CMake -DLOOKAHEAD_MPI=OFF): every process is a single-process job. This file replaces
// comm_mpi.cpp and comm_nccl.cpp (NCCL is bootstrapped over MPI, so it goes too); what needs several ranks
// fails with one clear error naming the build option.
#include <cstdlib>

#include "lookahead/dist/comm.h"
#include "lookahead/util/error.h"

namespace la {
namespace {
constexpr const char* kNoMpi = "this build has no MPI (configured with -DLOOKAHEAD_MPI=OFF)";
}

std::unique_ptr<Comm> make_comm(const std::string& kind, const std::string& device) {
  LA_CHECK(kind == "auto" || kind == "mpi" || kind == "nccl", "--comm must be auto, mpi or nccl (got '", kind,
           "')");
  LA_CHECK(kind != "nccl", "--comm nccl: ", kNoMpi, "; NCCL is bootstrapped over MPI");
  LA_CHECK(launcher_size() <= 1, "this process is one of ", launcher_size(), " ranks started by a launcher, but ",
           kNoMpi, "; rebuild with -DLOOKAHEAD_MPI=ON for multi-rank runs");
  (void)device;
  return make_local_comm();
}

bool built_with_mpi() { return false; }
void comm_set_stop_hook(int (*)(), std::function<void()>) {}
bool mpi_active() { return false; }
bool mpi_initialized() { return false; }
void mpi_init() { fail("a multi-rank job needs MPI, but ", kNoMpi); }
void mpi_finalize() {}
int mpi_world_rank() { return -1; }
int mpi_world_size() { return 0; }
void mpi_abort(int code) { std::_Exit(code); }
int comm_cuda_device_count() { return 0; }
int rank_cuda_device(int) { return 0; }
uint64_t gpu_identity(int) { return 0; }
std::unique_ptr<Comm> make_nccl_comm(std::unique_ptr<Comm>, int) { fail("--comm nccl: ", kNoMpi); }

}  // namespace la
