// The single-process communicator: rank 0 of 1, no MPI. Used whenever no launcher started this process (see
// launched_by_mpi_launcher), and the only one in builds without MPI (LOOKAHEAD_MPI=OFF). Every collective is the
// identity; point-to-point calls have no peer and fail.
#include <unistd.h>

#include "lookahead/dist/comm.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

class LocalComm final : public Comm {
 public:
  std::string backend() const override { return "local"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string host() const override {
    char name[256] = {0};
    if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
    return name;
  }
  void send(int dest, int, const std::vector<int32_t>&) override {
    fail("single-process communicator: no rank ", dest, " to send to");
  }
  std::vector<int32_t> recv(int src, int, double) override {
    fail("single-process communicator: no rank ", src, " to receive from");
  }
  void bcast(std::vector<int32_t>&, double) override {}
  void bcast_bytes(std::string&, double) override {}
  void scatter(const std::vector<std::vector<int32_t>>& msgs, std::vector<int32_t>&, double) override {
    LA_CHECK(msgs.size() == 1, "scatter: ", msgs.size(), " messages for 1 rank");
  }
  void gather(const std::vector<int32_t>& v, std::vector<std::vector<int32_t>>& all, double) override {
    all.resize(1);
    all[0].assign(v.begin(), v.end());
  }
  std::vector<uint64_t> allgather(uint64_t x) override { return {x}; }
  void barrier() override {}
  std::unique_ptr<Comm> split(int, int) override { return std::make_unique<LocalComm>(); }
  bool try_recv(int, int, std::vector<int32_t>&, int*) override { return false; }
};

}  // namespace

std::unique_ptr<Comm> make_local_comm() { return std::make_unique<LocalComm>(); }

}  // namespace la
