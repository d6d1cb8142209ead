// NCCL communicator: broadcasts (the per-step commands with the accepted tokens) go over NCCL between the ranks'
// GPUs; everything else (gather of results, point-to-point, startup collectives) is delegated to the MPI
// communicator it is built on, which also bootstraps the NCCL unique id. CUDA runtime only, no libtorch.
// Compiled for real only in CUDA builds (LOOKAHEAD_WITH_NCCL); elsewhere the entry points say NCCL is missing.
#include "lookahead/dist/comm.h"
#include "lookahead/util/error.h"

#ifdef LOOKAHEAD_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#endif

namespace la {

#ifndef LOOKAHEAD_WITH_NCCL

int comm_cuda_device_count() { return 0; }
uint64_t gpu_identity(int) { return 0; }
std::unique_ptr<Comm> make_nccl_comm(std::unique_ptr<Comm>, int) {
  fail("--comm nccl: this build has no NCCL (it was built without CUDA); use --comm mpi or auto");
}

#else

namespace {

constexpr int kChunk = 1024;  // ints in a broadcast's first round: [length, data...]

#define LA_CUDA_CHECK(expr)                                                     \
  do {                                                                          \
    const cudaError_t e_ = (expr);                                              \
    if (e_ != cudaSuccess) ::la::fail(#expr, ": ", cudaGetErrorString(e_));     \
  } while (0)
#define LA_NCCL_CHECK(expr)                                                     \
  do {                                                                          \
    const ncclResult_t r_ = (expr);                                             \
    if (r_ != ncclSuccess) ::la::fail(#expr, ": ", ncclGetErrorString(r_));     \
  } while (0)

uint64_t fnv(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

class NcclComm final : public Comm {
 public:
  NcclComm(std::unique_ptr<Comm> mpi, int device) : mpi_(std::move(mpi)), device_(device) {
    LA_CUDA_CHECK(cudaSetDevice(device_));
    // Bootstrap: rank 0 makes the unique id, MPI carries it.
    ncclUniqueId id;
    std::string bytes;
    if (rank() == 0) {
      LA_NCCL_CHECK(ncclGetUniqueId(&id));
      bytes.assign(reinterpret_cast<const char*>(&id), sizeof id);
    }
    mpi_->bcast_bytes(bytes);
    LA_CHECK(bytes.size() == sizeof id, "bad NCCL unique id from rank 0");
    std::memcpy(&id, bytes.data(), sizeof id);
    LA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // Non-blocking initialisation, polled with a deadline: a peer that never joins (crashed before init, wrong
    // network interface) would otherwise hang ncclCommInitRank forever, with no word of which rank waits.
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&nccl_, size(), id, rank(), &cfg);
    if (r != ncclSuccess && r != ncclInProgress)
      fail("rank ", rank(), " of ", size(), " (", host(), ", GPU ", device_, "): NCCL initialisation failed: ",
           ncclGetErrorString(r));
    wait_ready("NCCL initialisation", init_timeout_s());
    grow(kChunk);
  }
  ~NcclComm() override {
    if (nccl_) ncclCommDestroy(nccl_);
    if (dev_) cudaFree(dev_);
    if (host_) cudaFreeHost(host_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string backend() const override { return "nccl"; }
  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  int local_rank() const override { return mpi_->local_rank(); }
  int local_size() const override { return mpi_->local_size(); }
  std::string host() const override { return mpi_->host(); }

  void send(int dest, int tag, const std::vector<int32_t>& v) override {
    mpi_->send(dest, tag, v);
    sync_stats();
  }
  std::vector<int32_t> recv(int src, int tag, double timeout_s) override {
    auto v = mpi_->recv(src, tag, timeout_s);
    sync_stats();
    return v;
  }
  void gather(const std::vector<int32_t>& v, std::vector<std::vector<int32_t>>& all, double timeout_s) override {
    mpi_->gather(v, all, timeout_s);
    sync_stats();
  }
  void scatter(const std::vector<std::vector<int32_t>>& msgs, std::vector<int32_t>& mine, double timeout_s) override {
    mpi_->scatter(msgs, mine, timeout_s);
    sync_stats();
  }
  std::vector<uint64_t> allgather(uint64_t x) override { return mpi_->allgather(x); }
  void barrier() override { mpi_->barrier(); }
  // A group of its own (--lp-size): the MPI communicator is split, and the group's ranks initialise an NCCL
  // communicator over it (the group's rank 0 makes the unique id), so each group broadcasts among its own GPUs.
  std::unique_ptr<Comm> split(int color, int key) override {
    return make_nccl_comm(mpi_->split(color, key), device_);
  }
  bool try_recv(int src, int tag, std::vector<int32_t>& v, int* from) override {
    return mpi_->try_recv(src, tag, v, from);
  }
  int world_rank_of(int r) const override { return mpi_->world_rank_of(r); }
  std::string host_of(int r) const override { return mpi_->host_of(r); }
  void post(int dest, int tag, const std::vector<int32_t>& v) override { mpi_->post(dest, tag, v); }
  void flush() override { mpi_->flush(); }

  // Two rounds at most: a fixed-size first round [length, data...], then the rest when it does not fit.
  void bcast(std::vector<int32_t>& v, double timeout_s) override {
    const auto t0 = std::chrono::steady_clock::now();
    if (rank() == 0) {
      LA_CHECK(v.size() < 0x7fffffffu, "bcast: message too long");
      host_[0] = static_cast<int32_t>(v.size());
      std::copy_n(v.begin(), std::min<size_t>(v.size(), kChunk - 1), host_ + 1);
    }
    round(kChunk, timeout_s);
    const int n = host_[0];
    if (rank() != 0) {
      v.resize(n);
      std::copy_n(host_ + 1, std::min(n, kChunk - 1), v.begin());
    }
    if (n > kChunk - 1) {
      const int rest = n - (kChunk - 1);
      grow(rest);
      if (rank() == 0) std::copy_n(v.begin() + (kChunk - 1), rest, host_);
      round(rest, timeout_s);
      if (rank() != 0) std::copy_n(host_, rest, v.begin() + (kChunk - 1));
    }
    ++nccl_stats_.broadcasts;
    nccl_stats_.broadcast_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rank() == 0) nccl_stats_.bytes_sent += static_cast<uint64_t>(n) * 4;
    else nccl_stats_.bytes_received += static_cast<uint64_t>(n) * 4;
    sync_stats();
  }

  void bcast_bytes(std::string& s, double timeout_s) override {
    mpi_->bcast_bytes(s, timeout_s);
    sync_stats();
  }

 private:
  void grow(int count) {
    if (count <= cap_) return;
    if (dev_) cudaFree(dev_);
    if (host_) cudaFreeHost(host_);
    dev_ = nullptr;
    host_ = nullptr;
    LA_CUDA_CHECK(cudaMalloc(&dev_, sizeof(int32_t) * count));
    LA_CUDA_CHECK(cudaMallocHost(&host_, sizeof(int32_t) * count));
    cap_ = count;
  }
  // LOOKAHEAD_NCCL_INIT_TIMEOUT (seconds, default 300): how long ranks wait for each other in ncclCommInitRank.
  static double init_timeout_s() {
    const char* e = std::getenv("LOOKAHEAD_NCCL_INIT_TIMEOUT");
    const double v = e && *e ? std::atof(e) : 0.0;
    return v > 0 ? v : 300.0;
  }
  // Polls a non-blocking communicator until its pending operation (initialisation, an enqueue) is done; on an error
  // or past the deadline the communicator is aborted and the error names this rank.
  void wait_ready(const char* what, double timeout_s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      ncclResult_t st = ncclInProgress;
      const ncclResult_t q = ncclCommGetAsyncError(nccl_, &st);
      if (q == ncclSuccess && st == ncclSuccess) return;
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const bool failed = q != ncclSuccess || st != ncclInProgress;
      if (failed || (timeout_s > 0 && el > timeout_s)) {
        ncclCommAbort(nccl_);
        nccl_ = nullptr;
        if (failed)
          fail("rank ", rank(), " of ", size(), " (", host(), ", GPU ", device_, "): ", what, " failed: ",
               ncclGetErrorString(q != ncclSuccess ? q : st));
        fail("rank ", rank(), " of ", size(), " (", host(), ", GPU ", device_, "): ", what, " did not complete within ",
             timeout_s, " s (a peer rank did not join; LOOKAHEAD_NCCL_INIT_TIMEOUT sets the limit)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(el < 1 ? 1 : 10));
    }
  }
  // host_[0, count) on rank 0 -> host_[0, count) everywhere, through the device buffer, polling for completion.
  void round(int count, double timeout_s) {
    const size_t bytes = sizeof(int32_t) * count;
    if (rank() == 0) LA_CUDA_CHECK(cudaMemcpyAsync(dev_, host_, bytes, cudaMemcpyHostToDevice, stream_));
    // A non-blocking communicator may return ncclInProgress: the broadcast is enqueued once that state clears.
    const ncclResult_t r = ncclBroadcast(dev_, dev_, count, ncclInt32, 0, nccl_, stream_);
    if (r != ncclSuccess && r != ncclInProgress) fail("NCCL broadcast failed: ", ncclGetErrorString(r));
    if (r == ncclInProgress) wait_ready("NCCL broadcast enqueue", timeout_s);
    if (rank() != 0) LA_CUDA_CHECK(cudaMemcpyAsync(host_, dev_, bytes, cudaMemcpyDeviceToHost, stream_));
    const auto t0 = std::chrono::steady_clock::now();
    int sleep_us = 20;
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) fail("NCCL broadcast failed: ", cudaGetErrorString(e));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(nccl_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(nccl_);
        nccl_ = nullptr;
        fail("NCCL broadcast failed: ", ncclGetErrorString(async));
      }
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (timeout_s > 0 && el > timeout_s) {
        ncclCommAbort(nccl_);
        nccl_ = nullptr;
        fail("NCCL broadcast did not complete within ", timeout_s, " s (a rank is stuck)");
      }
      if (el < 2e-3) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
        sleep_us = std::min(sleep_us * 2, 1000);
      }
    }
  }
  void sync_stats() {
    stats_ = mpi_->stats();
    stats_.bytes_sent += nccl_stats_.bytes_sent;
    stats_.bytes_received += nccl_stats_.bytes_received;
    stats_.broadcasts += nccl_stats_.broadcasts;
    stats_.broadcast_seconds += nccl_stats_.broadcast_seconds;
  }

  std::unique_ptr<Comm> mpi_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  ncclComm_t nccl_ = nullptr;
  int32_t* dev_ = nullptr;
  int32_t* host_ = nullptr;
  int cap_ = 0;
  CommStats nccl_stats_;
};

}  // namespace

int comm_cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return n;
}

uint64_t gpu_identity(int device) {
  if (device < 0 || device >= comm_cuda_device_count()) return 0;
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  uint64_t h = fnv(host, std::strlen(host));
  h = fnv(bus, std::strlen(bus), h);
  return h ? h : 1;
}

std::unique_ptr<Comm> make_nccl_comm(std::unique_ptr<Comm> mpi, int device) {
  return std::make_unique<NcclComm>(std::move(mpi), device);
}

#endif  // LOOKAHEAD_WITH_NCCL

}  // namespace la
