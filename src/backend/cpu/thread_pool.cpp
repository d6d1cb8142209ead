// The CPU kernels' thread pool (why and how: include/lookahead/backend/cpu/thread_pool.h).
#include "lookahead/backend/cpu/thread_pool.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include <chrono>
#include <cstdlib>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace la {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spin about this long before sleeping: longer than the gaps between a step's regions, far shorter than a step.
constexpr auto kSpin = std::chrono::microseconds(50);

// The futex directly, not std::atomic::wait: libstdc++ 12's wait/notify lost wake-ups here (a pool of 2 hung
// within a few thousand regions). Dekker-style: a sleeper counts itself in `sleepers` before re-checking the value
// (seq_cst on both sides), so a waker that changed the value either sees the count or the sleeper sees the value.
template <class T>
void futex_wait(const std::atomic<T>& a, T old) {
  static_assert(sizeof(T) == 4);
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&a), FUTEX_WAIT_PRIVATE, uint32_t(old), nullptr, nullptr, 0);
}
template <class T>
void futex_wake_all(const std::atomic<T>& a) {
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&a), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// Waits until a.load() != old: spins for kSpin, then sleeps on the futex.
template <class T>
T wait_change(const std::atomic<T>& a, T old, std::atomic<int>& sleepers) {
  T v = a.load(std::memory_order_acquire);
  if (v != old) return v;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    cpu_relax();
    v = a.load(std::memory_order_acquire);
    if (v != old) return v;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() - t0 > kSpin) break;
  }
  for (;;) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    v = a.load(std::memory_order_seq_cst);
    if (v == old) futex_wait(a, old);
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    v = a.load(std::memory_order_acquire);
    if (v != old) return v;
  }
}

// Publishes a change of `a` made by the caller: wakes its sleepers, if any.
template <class T>
void wake(const std::atomic<T>& a, const std::atomic<int>& sleepers) {
  if (sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(a);
}

}  // namespace

int ThreadPool::default_threads() {
  if (const char* e = std::getenv("OMP_NUM_THREADS"); e && *e) {
    const int n = std::atoi(e);
    if (n > 0) return n;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int threads) : n_(std::max(1, threads)) {
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(run_mu_);
    stop_.store(true, std::memory_order_release);
    gen_.fetch_add(1, std::memory_order_seq_cst);
    wake(gen_, gen_sleepers_);
  }
  for (auto& t : threads_) t.join();
}

void ThreadPool::run_impl(void (*fn)(void*, int, int), void* ctx) {
  std::lock_guard<std::mutex> lk(run_mu_);
  if (n_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  pending_.store(n_ - 1, std::memory_order_relaxed);
  gen_.fetch_add(1, std::memory_order_seq_cst);
  wake(gen_, gen_sleepers_);
  fn(ctx, 0, n_);
  for (int left = pending_.load(std::memory_order_acquire); left != 0;)
    left = wait_change(pending_, left, pending_sleepers_);
}

void ThreadPool::worker(int id) {
  uint32_t seen = 0;  // gen_'s value at construction: a worker that starts late must not skip the first region
  for (;;) {
    seen = wait_change(gen_, seen, gen_sleepers_);
    if (stop_.load(std::memory_order_acquire)) return;
    fn_(ctx_, id, n_);
    pending_.fetch_sub(1, std::memory_order_seq_cst);
    wake(pending_, pending_sleepers_);
  }
}

}  // namespace la
