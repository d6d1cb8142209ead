// MPI communicator (all messages) and backend selection (launcher detection: launcher.cpp).
#define OMPI_SKIP_MPICXX 1  // C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <deque>
#include <thread>

#include "lookahead/dist/comm.h"
#include "lookahead/util/clock.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

constexpr int kGatherTag = 30001;  // point-to-point tags of the caller must stay below 30000
constexpr int kBcastTag = 30002;

int (*g_stop_query)() = nullptr;  // comm_set_stop_hook
std::function<void()> g_stop_hook;
bool g_stop_hook_ran = false;

// Spin (yielding) for a while, then sleep in growing steps: low latency when the answer is close, no burnt core
// when a rank idles (e.g. workers while rank 0 plans, or everyone while one rank prefills a long prompt).
class Backoff {
 public:
  Backoff() : t0_(Clock::now()), spin_us_(env_int("LA_COMM_SPIN_US", 2000)) {}
  double elapsed() const {
    return seconds_since(t0_);
  }
  void pause() {
    if (elapsed() * 1e6 < spin_us_) {
      sched_yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    sleep_us_ = std::min(sleep_us_ * 2, 250);
  }

 private:
  Clock::time_point t0_;
  int spin_us_;
  int sleep_us_ = 20;
};

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, len);
}

void ensure_mpi() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  LA_CHECK(!fin, "MPI was already finalised");
  if (!init) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    LA_CHECK(rc == MPI_SUCCESS, "MPI_Init failed: ", mpi_error_string(rc));
  }
}

class MpiComm final : public Comm {
 public:
  // The job's communicator (a duplicate of MPI_COMM_WORLD).
  MpiComm() : MpiComm(dup_world()) {}
  // Takes `comm` over (a duplicate of the world, or a group split from it). Collective over `comm`.
  explicit MpiComm(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    reqs_.resize(static_cast<size_t>(size_ > 1 ? size_ - 1 : 0));
    have_.resize(static_cast<size_t>(size_));
    MPI_Comm node;
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
    char pname[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(pname, &len);
    host_.assign(pname, len);
    // Every rank's host, once at startup, so that a rank that goes silent (a dead node, a cut link) is named
    // with its host in rank 0's error: across nodes the rank number alone does not say which machine to look at.
    std::vector<char> all(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME, 0);
    std::memset(pname + len, 0, MPI_MAX_PROCESSOR_NAME - len);
    check(MPI_Allgather(pname, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm_),
          "MPI_Allgather (host names)");
    for (int r = 0; r < size_; ++r) {
      const char* h = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
      hosts_.emplace_back(h, strnlen(h, MPI_MAX_PROCESSOR_NAME));
    }
    // Every rank's number in the job: errors of a group's communicator name ranks as the job (and mpirun) does.
    int wr = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    world_.assign(size_, 0);
    check(MPI_Allgather(&wr, 1, MPI_INT, world_.data(), 1, MPI_INT, comm_), "MPI_Allgather (world ranks)");
  }
  static MPI_Comm dup_world() {
    ensure_mpi();
    MPI_Comm c = MPI_COMM_NULL;
    const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &c);
    LA_CHECK(rc == MPI_SUCCESS, "MPI_Comm_dup failed: ", mpi_error_string(rc));
    return c;
  }
  ~MpiComm() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&comm_);
  }

  std::string backend() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string host() const override { return host_; }

  void send(int dest, int tag, const std::vector<int32_t>& v) override {
    check_peer(dest, "send to");
    MPI_Request req;
    check(MPI_Isend(v.data(), static_cast<int>(v.size()), MPI_INT32_T, dest, tag, comm_, &req), "MPI_Isend");
    wait(req, 0, [&] { return "sending to rank " + name(dest); });
    stats_.bytes_sent += v.size() * 4;
    ++stats_.messages;
  }

  std::vector<int32_t> recv(int src, int tag, double timeout_s) override {
    std::vector<int32_t> v;
    recv_into(src, tag, v, timeout_s);
    return v;
  }

  // Receives into `v` (its capacity reused: no allocation for a message no longer than an earlier one).
  void recv_into(int src, int tag, std::vector<int32_t>& v, double timeout_s) {
    check_peer(src, "receive from");
    Backoff b;
    MPI_Status st;
    for (;;) {
      int flag = 0;
      check(MPI_Iprobe(src, tag, comm_, &flag, &st), "MPI_Iprobe");
      if (flag) break;
      if (timeout_s > 0 && b.elapsed() > timeout_s)
        fail("no message from rank ", name(src), " within ", timeout_s,
             " s (that rank is stuck, or too slow for --rank-timeout)");
      if (rank_ == 0) stop_while_waiting([&] { return name(src); });
      b.pause();
    }
    int count = 0;
    MPI_Get_count(&st, MPI_INT32_T, &count);
    v.resize(count);
    check(MPI_Recv(v.data(), count, MPI_INT32_T, src, tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
    stats_.bytes_received += v.size() * 4;
  }

  // Linear fan-out from rank 0 with point-to-point messages: the receivers learn the length from the message,
  // and rank 0 knows exactly which ranks have not taken theirs (a stuck rank gets named). Small messages go
  // eagerly, so rank 0 is done as soon as they are queued.
  void bcast(std::vector<int32_t>& v, double timeout_s) override {
    if (rank_ == 0) {
      fan_out([&](int) -> const std::vector<int32_t>& { return v; }, timeout_s);
    } else {
      Backoff b;
      recv_into(0, kBcastTag, v, timeout_s);
      ++stats_.broadcasts;
      stats_.broadcast_seconds += b.elapsed();
    }
  }

  void scatter(const std::vector<std::vector<int32_t>>& msgs, std::vector<int32_t>& mine, double timeout_s) override {
    if (rank_ == 0) {
      LA_CHECK(static_cast<int>(msgs.size()) == size_, "scatter: ", msgs.size(), " messages for ", size_, " ranks");
      fan_out([&](int r) -> const std::vector<int32_t>& { return msgs[r]; }, timeout_s);
      return;
    }
    Backoff b;
    recv_into(0, kBcastTag, mine, timeout_s);
    ++stats_.broadcasts;
    stats_.broadcast_seconds += b.elapsed();
  }

  void bcast_bytes(std::string& s, double timeout_s) override {
    std::vector<int32_t> v;
    if (rank_ == 0) {
      v.resize(1 + (s.size() + 3) / 4, 0);
      v[0] = static_cast<int32_t>(s.size());
      std::memcpy(v.data() + 1, s.data(), s.size());
    }
    bcast(v, timeout_s);
    if (rank_ != 0) {
      LA_CHECK(!v.empty() && v[0] >= 0 && static_cast<size_t>(v[0]) <= (v.size() - 1) * 4, "bcast_bytes: bad length");
      s.assign(reinterpret_cast<const char*>(v.data() + 1), v[0]);
    }
  }

  void gather(const std::vector<int32_t>& v, std::vector<std::vector<int32_t>>& out, double timeout_s) override {
    Backoff b;
    if (rank_ != 0) {
      send(0, kGatherTag, v);
    } else {
      out.resize(size_);
      out[0].assign(v.begin(), v.end());
      std::vector<uint8_t>& have = have_;  // sized at construction
      std::fill(have.begin(), have.end(), 0);
      have[0] = 1;
      int missing = size_ - 1;
      while (missing > 0) {
        bool progress = false;
        for (int r = 1; r < size_; ++r) {
          if (have[r]) continue;
          int flag = 0;
          MPI_Status st;
          check(MPI_Iprobe(r, kGatherTag, comm_, &flag, &st), "MPI_Iprobe");
          if (!flag) continue;
          int count = 0;
          MPI_Get_count(&st, MPI_INT32_T, &count);
          out[r].resize(count);
          check(MPI_Recv(out[r].data(), count, MPI_INT32_T, r, kGatherTag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
          stats_.bytes_received += static_cast<uint64_t>(count) * 4;
          have[r] = 1;
          --missing;
          progress = true;
        }
        if (missing == 0 || progress) continue;
        if (timeout_s > 0 && b.elapsed() > timeout_s) {
          const std::string who = missing_ranks(have);
          fail("no reply from rank(s) ", who, " within ", timeout_s,
               " s (stuck, or too slow for --rank-timeout)");
        }
        stop_while_waiting([&] { return missing_ranks(have); });
        b.pause();
      }
    }
    ++stats_.gathers;
    stats_.gather_seconds += b.elapsed();
  }

  std::vector<uint64_t> allgather(uint64_t x) override {
    std::vector<uint64_t> all(size_);
    MPI_Request req;
    check(MPI_Iallgather(&x, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, &req), "MPI_Iallgather");
    wait(req, 0, [] { return std::string("in allgather"); });
    return all;
  }

  void barrier() override {
    MPI_Request req;
    check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
    wait(req, 0, [] { return std::string("in barrier"); });
  }

  std::unique_ptr<Comm> split(int color, int key) override {
    MPI_Comm c = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &c), "MPI_Comm_split");
    return std::make_unique<MpiComm>(c);
  }

  bool try_recv(int src, int tag, std::vector<int32_t>& v, int* from) override {
    if (src >= 0) check_peer(src, "receive from");
    int flag = 0;
    MPI_Status st;
    check(MPI_Iprobe(src < 0 ? MPI_ANY_SOURCE : src, tag, comm_, &flag, &st), "MPI_Iprobe");
    if (!flag) return false;
    int count = 0;
    MPI_Get_count(&st, MPI_INT32_T, &count);
    v.resize(count);
    check(MPI_Recv(v.data(), count, MPI_INT32_T, st.MPI_SOURCE, tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
    stats_.bytes_received += static_cast<uint64_t>(count) * 4;
    if (from) *from = st.MPI_SOURCE;
    return true;
  }

  void post(int dest, int tag, const std::vector<int32_t>& v) override {
    check_peer(dest, "send to");
    reap();
    posted_.emplace_back();
    Posted& p = posted_.back();
    p.data = v;
    p.dest = dest;
    check(MPI_Isend(p.data.data(), static_cast<int>(p.data.size()), MPI_INT32_T, dest, tag, comm_, &p.req),
          "MPI_Isend");
    stats_.bytes_sent += v.size() * 4;
    ++stats_.messages;
  }

  void flush() override {
    for (auto& p : posted_) wait(p.req, 0, [&] { return "sending to rank " + name(p.dest); });
    posted_.clear();
  }

  std::string host_of(int r) const override {
    return r >= 0 && r < static_cast<int>(hosts_.size()) ? hosts_[r] : host_;
  }

  int world_rank_of(int r) const override {
    return r >= 0 && r < static_cast<int>(world_.size()) ? world_[r] : r;
  }

 private:
  void check(int rc, const char* what) const {
    if (rc != MPI_SUCCESS) fail(what, " failed: ", mpi_error_string(rc));
  }
  std::string missing_ranks(const std::vector<uint8_t>& have) const {
    std::string who;
    for (int r = 1; r < size_; ++r)
      if (!have[r]) who += (who.empty() ? "" : ", ") + name(r);
    return who;
  }
  // Rank 0 waiting for ranks when a stop signal arrives: run the stop hook (comm_set_stop_hook: save the
  // strategy's state) once, right away, and say whom rank 0 waits for. When a launcher loses a node (a killed
  // host) it sends the survivors SIGTERM and SIGKILL within a fraction of a second, while rank 0 is still blocked
  // on the lost rank; without this the warm state would be lost. Healthy workers keep serving after a signal,
  // so the wait goes on and a clean stop is unchanged (the state is saved again at its end).
  template <class Who>
  void stop_while_waiting(Who who) const {
    if (g_stop_hook_ran || !g_stop_query || g_stop_query() == 0) return;
    g_stop_hook_ran = true;
    std::fprintf(stderr, "[rank %d] a stop signal came while waiting for rank(s) %s: saving state\n", rank_,
                 who().c_str());
    std::fflush(stderr);
    if (g_stop_hook) g_stop_hook();
  }
  // How errors name rank r: its rank in the job (world), plus its host where that differs from this rank's.
  std::string name(int r) const { return std::to_string(world_rank_of(r)) + on_host(r); }
  // " on host H" for a rank whose host differs from this rank's (on one node the host says nothing new).
  std::string on_host(int r) const {
    if (r < 0 || r >= static_cast<int>(hosts_.size()) || hosts_[r] == host_) return "";
    return " on host " + hosts_[r];
  }
  void check_peer(int r, const char* what) const {
    LA_CHECK(r >= 0 && r < size_ && r != rank_, "cannot ", what, " rank ", r, " (job has ",
             size_, " ranks)");
  }
  template <class Describe>
  void wait(MPI_Request& req, double timeout_s, Describe describe) {
    Backoff b;
    for (;;) {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      if (timeout_s > 0 && b.elapsed() > timeout_s)
        fail("timed out after ", timeout_s, " s ", describe());
      b.pause();
    }
  }
  template <class Msg>
  void fan_out(Msg msg, double timeout_s) {
    Backoff b;
    std::vector<MPI_Request>& reqs = reqs_;  // sized at construction
    for (int r = 1; r < size_; ++r) {
      const auto& v = msg(r);
      LA_CHECK(v.size() < 0x7fffffffu, "message to rank ", r, " too long");
      check(MPI_Isend(v.data(), static_cast<int>(v.size()), MPI_INT32_T, r, kBcastTag, comm_, &reqs[r - 1]),
            "MPI_Isend");
      stats_.bytes_sent += static_cast<uint64_t>(v.size()) * 4;
    }
    for (;;) {
      int done = 0;
      check(MPI_Testall(size_ - 1, reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (done) break;
      if (timeout_s > 0 && b.elapsed() > timeout_s) {
        std::string who;
        for (int r = 1; r < size_; ++r) {
          int d = 0;
          MPI_Test(&reqs[r - 1], &d, MPI_STATUS_IGNORE);
          if (!d) who += (who.empty() ? "" : ", ") + name(r);
        }
        fail("rank(s) ", who, " did not take rank 0's message within ", timeout_s,
             " s (stuck, or too slow for --rank-timeout)");
      }
      stop_while_waiting([&] {
        std::string who;
        for (int r = 1; r < size_; ++r) who += (who.empty() ? "" : ", ") + name(r);
        return who;
      });
      b.pause();
    }
    ++stats_.broadcasts;
    stats_.broadcast_seconds += b.elapsed();
  }

  // Drops the posted messages that were taken (in order: the oldest first).
  void reap() {
    while (!posted_.empty()) {
      int done = 0;
      check(MPI_Test(&posted_.front().req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) return;
      posted_.pop_front();
    }
  }

  struct Posted {  // a post()ed message: its buffer lives until MPI is done with it
    std::vector<int32_t> data;
    MPI_Request req = MPI_REQUEST_NULL;
    int dest = 0;
  };
  std::deque<Posted> posted_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  std::vector<std::string> hosts_;  // hosts_[r]: rank r's processor name
  std::vector<int> world_;          // world_[r]: rank r's rank in MPI_COMM_WORLD
  std::vector<MPI_Request> reqs_;   // fan_out's requests (size_ - 1; reused every step)
  std::vector<uint8_t> have_;       // gather's replies received (size_; reused every step)
};

}  // namespace

bool mpi_active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

bool mpi_initialized() {
  int init = 0;
  MPI_Initialized(&init);
  return init != 0;
}

void mpi_init() { ensure_mpi(); }

void mpi_finalize() {
  if (mpi_active()) MPI_Finalize();
}

int mpi_world_rank() {
  if (!mpi_active()) return -1;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_world_size() {
  if (!mpi_active()) return 0;
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void mpi_abort(int code) {
  if (mpi_active()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

bool built_with_mpi() { return true; }

void comm_set_stop_hook(int (*query)(), std::function<void()> hook) {
  // Open MPI's own error paths (e.g. the TCP BTL finding a peer's connection closed: a killed host) abort the
  // process from inside an MPI call with exit(); the hook still saves the state then. Cleared hooks do nothing.
  static const bool at_exit = [] {
    std::atexit([] {
      if (g_stop_hook && !g_stop_hook_ran) {
        g_stop_hook_ran = true;
        g_stop_hook();
      }
    });
    return true;
  }();
  (void)at_exit;
  g_stop_query = query;
  g_stop_hook = std::move(hook);
  g_stop_hook_ran = false;
}

int rank_cuda_device(int local_rank) {
  const int n = comm_cuda_device_count();
  return n > 0 ? local_rank % n : 0;
}

std::unique_ptr<Comm> make_comm(const std::string& kind, const std::string& device) {
  LA_CHECK(kind == "auto" || kind == "mpi" || kind == "nccl", "--comm must be auto, mpi or nccl (got '", kind,
           "')");
  if (!launched_by_mpi_launcher()) {  // started by hand: one process, and MPI stays uninitialised
    LA_CHECK(kind != "nccl", "--comm nccl needs a multi-rank job started by mpirun or srun (this is one process",
             device != "cuda" ? ", and the model is on '" + device + "', not cuda)" : std::string(")"));
    return make_local_comm();
  }
  std::unique_ptr<Comm> mpi = std::make_unique<MpiComm>();
  if (kind == "mpi") return mpi;
  const bool want = kind == "nccl";
#ifndef LOOKAHEAD_WITH_NCCL
  LA_CHECK(!want, "--comm nccl: this build has no NCCL (it was built without CUDA); use --comm mpi or auto");
  (void)device;
  return mpi;
#else
  if (device != "cuda") {
    LA_CHECK(!want, "--comm nccl needs --device cuda (the model is on '", device, "')");
    return mpi;
  }
  if (mpi->size() == 1 && !want) return mpi;
  const int dev = rank_cuda_device(mpi->local_rank());
  const auto ids = mpi->allgather(gpu_identity(dev));
  std::string problem;
  for (size_t r = 0; r < ids.size() && problem.empty(); ++r) {
    if (ids[r] == 0) problem = detail::cat("rank ", r, " sees no CUDA device");
    for (size_t q = 0; q < r && problem.empty(); ++q)
      if (ids[q] == ids[r]) problem = detail::cat("ranks ", q, " and ", r, " share one GPU");
  }
  if (!problem.empty()) {
    LA_CHECK(!want, "--comm nccl needs one GPU per rank, but ", problem,
             " (bind ranks to GPUs: launch/mpirun.sh sets CUDA_VISIBLE_DEVICES per local rank)");
    return mpi;
  }
  return make_nccl_comm(std::move(mpi), dev);
#endif
}

}  // namespace la
