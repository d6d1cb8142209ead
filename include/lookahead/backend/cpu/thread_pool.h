// One persistent thread pool for every CPU kernel of a forward (sized by --threads).
//
// Why by hand: a decoding step runs about five parallel regions per layer, each a few to a few hundred
// microseconds, so a fork/join per region (std::thread, std::async) would cost more than the work; OpenMP's pool
// spins against other processes unboundedly and is shared with libtorch's own ops. Here the workers spin for a
// bounded time (about 50 us), then sleep on a futex, so a short gap between regions costs no
// system call and an idle pool costs no CPU.
//
// Work is split statically by the caller: participant i of n gets the same slice in every run, and each output
// element is computed by one participant alone, so results never depend on the thread count.
#pragma once
#include <atomic>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace la {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1 participants: the caller plus threads - 1 workers
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }
  // Calls f(i, n) once for every participant i in [0, n) (i = 0 on the calling thread) and returns when all have
  // returned. One region at a time: concurrent callers (replicas sharing the pool) take turns.
  template <class F>
  void run(F&& f) {
    run_impl([](void* c, int i, int n) { (*static_cast<std::remove_reference_t<F>*>(c))(i, n); }, &f);
  }

  // --threads 0: every core this process may use, or OMP_NUM_THREADS when set (the test suite sets it to 1 so
  // that two tests sharing two cores do not spin against each other).
  static int default_threads();

 private:
  void run_impl(void (*fn)(void*, int, int), void* ctx);
  void worker(int id);

  int n_;
  std::mutex run_mu_;
  std::atomic<uint32_t> gen_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> gen_sleepers_{0}, pending_sleepers_{0};  // threads asleep on gen_ / pending_
  std::atomic<bool> stop_{false};
  void (*fn_)(void*, int, int) = nullptr;
  void* ctx_ = nullptr;
  std::vector<std::thread> threads_;
};

}  // namespace la
