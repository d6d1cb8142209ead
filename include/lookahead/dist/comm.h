// Communicators between model replicas (one MPI rank each). No libtorch here, and no MPI/NCCL types in this
// header: the MPI backend lives in comm_mpi.cpp, the NCCL one (broadcast of accepted tokens on the GPUs) in
// comm_nccl.cpp, compiled only in CUDA builds (LOOKAHEAD_WITH_NCCL).
//
// Every blocking call polls (MPI_Test / cudaStreamQuery) instead of blocking inside MPI or NCCL, so that a
// timeout can name the rank that did not answer, and so that idle ranks do not burn the cores the computing ranks
// need: they spin for a short while (LA_COMM_SPIN_US, default 2000 us), then sleep in growing steps (up to
// 0.25 ms; the NCCL wait up to 1 ms). timeout_s <= 0 means wait forever (a dead rank is then detected by
// mpirun / srun, see parallel_executor.h).
// Failures throw la::Error naming the ranks involved.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/parallel/launcher.h"  // launcher_rank, launcher_size, launched_by_mpi_launcher

namespace la {

struct CommStats {
  uint64_t bytes_sent = 0;      // payload bytes this rank sent (point-to-point + broadcasts it rooted)
  uint64_t bytes_received = 0;  // payload bytes this rank received
  uint64_t messages = 0;        // point-to-point messages sent
  uint64_t broadcasts = 0;        // bcast and scatter calls
  double broadcast_seconds = 0;  // wall time inside them (on workers this includes waiting for rank 0)
  uint64_t gathers = 0;
  double gather_seconds = 0;     // wall time inside gather
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual std::string backend() const = 0;  // "mpi" or "nccl"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // rank among the ranks on this node
  virtual int local_size() const = 0;
  virtual std::string host() const = 0;

  // Point-to-point int32 vectors (any length; the receiver learns it from the message).
  virtual void send(int dest, int tag, const std::vector<int32_t>& v) = 0;
  virtual std::vector<int32_t> recv(int src, int tag, double timeout_s = 0) = 0;
  // Broadcast from rank 0: `v` is read on rank 0 and replaced elsewhere (any length, not known in advance).
  virtual void bcast(std::vector<int32_t>& v, double timeout_s = 0) = 0;
  virtual void bcast_bytes(std::string& s, double timeout_s = 0) = 0;
  // Rank 0 sends msgs[r] to every rank r > 0 (msgs[0] is not sent; msgs.size() == size()); every other rank
  // receives the message meant for it into `mine` (its capacity reused; untouched on rank 0). Point-to-point over
  // MPI on every backend (small per-rank messages).
  virtual void scatter(const std::vector<std::vector<int32_t>>& msgs, std::vector<int32_t>& mine,
                       double timeout_s = 0) = 0;
  // Every rank's `v` at rank 0 into all[r] (all.size() == size(); each buffer's capacity reused); `all` is left
  // as it is on the other ranks.
  // The step's collectives (bcast, scatter, gather) write into the caller's buffers, so a step that sends no
  // message longer than an earlier one allocates nothing here (test_alloc checks the comm group and the worker
  // over a Comm of threads; MPI's own buffers are its business).
  virtual void gather(const std::vector<int32_t>& v, std::vector<std::vector<int32_t>>& all, double timeout_s = 0) = 0;
  // Every rank's value on every rank.
  virtual std::vector<uint64_t> allgather(uint64_t x) = 0;
  virtual void barrier() = 0;

  // Data-parallel groups (--lp-size): the ranks that pass the same `color` become a communicator of their own,
  // ordered by `key` (MPI_Comm_split; collective over this communicator). Over NCCL each group gets its own NCCL
  // communicator (a unique id of its own, initialised over the group's MPI communicator).
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;
  // Never blocks: when a message with `tag` from rank `src` (-1: any rank) is waiting, moves it into `v`, sets
  // *from to its sender and returns true; else false. (The request queue polls with it between steps.)
  virtual bool try_recv(int src, int tag, std::vector<int32_t>& v, int* from) = 0;
  // Non-blocking send (the request queue's records and shared drafts): `v` is copied and handed to MPI at once, and
  // this rank goes on; a message too large to go eagerly is delivered when the receiver takes it. flush() waits
  // until every posted message was taken (before the ranks finalise). Default: send().
  virtual void post(int dest, int tag, const std::vector<int32_t>& v) { send(dest, tag, v); }
  virtual void flush() {}
  // Rank r's host (processor name), for errors that name a rank on a multi-host job.
  virtual std::string host_of(int r) const { (void)r; return host(); }
  // The number errors name rank r by: its rank in the job (MPI_COMM_WORLD), also in a communicator split from it.
  virtual int world_rank_of(int r) const { return r; }

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }

 protected:
  CommStats stats_;
};

// Creates the communicator over all ranks of the job. A process no launcher started (launched_by_mpi_launcher()
// false) gets the single-process communicator (backend "local") and MPI is never initialised; so does every
// process of a build without MPI (LOOKAHEAD_MPI=OFF), where a launched multi-rank job is an error. Otherwise
// MPI is initialised if needed: `kind`: "auto" | "mpi" | "nccl"; `device`: the model device ("cpu" or "cuda").
// auto picks nccl when this is a CUDA/NCCL build, the device is cuda, there is more than one rank and every rank
// has a GPU of its own (distinct GPU UUIDs per node), else mpi. "nccl" without that throws la::Error saying why.
// Collective: every rank must call it.
std::unique_ptr<Comm> make_comm(const std::string& kind, const std::string& device);
// The single-process communicator (rank 0 of 1; collectives are the identity). No MPI.
std::unique_ptr<Comm> make_local_comm();
// Whether this build has MPI (CMake LOOKAHEAD_MPI).
bool built_with_mpi();

// CUDA devices this process sees (0 in builds without NCCL/CUDA or without a driver).
int comm_cuda_device_count();
// The CUDA device index a rank uses: local_rank % comm_cuda_device_count() (0 when there are none). launch/mpirun.sh
// and the sbatch scripts narrow CUDA_VISIBLE_DEVICES to one GPU per rank, so this is then 0. The model must be
// placed on this device too.
int rank_cuda_device(int local_rank);

// Process-level MPI helpers. mpi_active: initialised and not finalised. mpi_init / mpi_finalize are idempotent.
// mpi_world_rank / size: -1 / 0 when MPI is not active. mpi_abort: MPI_Abort(MPI_COMM_WORLD, code), or _exit
// when MPI is not active.
bool mpi_active();
// MPI_Init was called in this process (even if finalised since); false in builds without MPI.
bool mpi_initialized();
void mpi_init();
void mpi_finalize();
int mpi_world_rank();
int mpi_world_size();
[[noreturn]] void mpi_abort(int code);
// Rank 0's MPI waits ask query() (the pending stop signal, 0: none); the first time one sees a signal it names
// the ranks it waits for on stderr and calls hook() (save the strategy's state) before waiting on: a launcher
// that lost a host kills the survivors within a fraction of a second (comm_mpi.cpp). (nullptr, nullptr): off.
void comm_set_stop_hook(int (*query)(), std::function<void()> hook);

// Internal (comm_nccl.cpp): the NCCL communicator, built over an MPI one. Throws when unavailable.
std::unique_ptr<Comm> make_nccl_comm(std::unique_ptr<Comm> mpi, int device);
// Internal: a hash of this rank's GPU identity (host + UUID of `device`), 0 when there is no GPU.
uint64_t gpu_identity(int device);

}  // namespace la
