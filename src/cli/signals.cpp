// SIGINT/SIGTERM handling for `lookahead generate` (see signals.h). Written by hand: no maintained Debian
// library offers a portable "first signal sets a flag, second one exits" handler, and it is a few lines of POSIX.
#include "signals.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace la::cli {
namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal flag must be lock-free (async-signal-safe)");

void on_signal(int sig) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) return;  // first: the loop stops cleanly
  // Second signal: leave at once. Only async-signal-safe calls here.
  static const char msg[] = "lookahead: second signal: exiting at once\n";
  ssize_t w = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)w;
  _exit(128 + sig);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return g_signal.load(std::memory_order_relaxed); }
const std::atomic<int>& stop_signal_flag() { return g_signal; }

void request_stop(int signal) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, signal);
}

int interrupted_exit_code(int signal) { return 128 + signal; }

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

void StopControl::begin_request(int max_new_tokens) {
  max_new_ = max_new_tokens;
  request_t0_ = Clock::now();
  cancel_.store(false, std::memory_order_relaxed);
}

bool StopControl::decide(int new_tokens) {
  const auto now = Clock::now();
  const bool first = !seen_;
  if (first) {
    seen_ = true;
    seen_at_ = now;
  }
  if (cancel_.load(std::memory_order_relaxed)) return first;
  // Upper bound of the time left: the tokens still allowed at this request's rate so far (no budget: unknown).
  const double left_s = std::chrono::duration<double>(seen_at_ + std::chrono::duration<double>(grace_s_) - now).count();
  const double spent = seconds_between(request_t0_, now);
  bool finish = false;
  if (max_new_ > 0 && new_tokens > 0 && left_s > 0) {
    const double eta = spent / new_tokens * (max_new_ - new_tokens);
    finish = eta <= left_s;
  }
  if (!finish) cancel_.store(true, std::memory_order_relaxed);
  return first;
}

}  // namespace la::cli
