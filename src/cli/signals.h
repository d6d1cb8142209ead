// Clean stop of `lookahead generate` on SIGINT / SIGTERM (Ctrl-C, scancel, Slurm's --signal warning, mpirun and
// srun forwarding a signal to every rank).
//
// The handler is async-signal-safe: the first signal only stores its number in a lock-free atomic (the step loop
// reads it with one relaxed load per step); a second SIGINT/SIGTERM writes one line with write(2) and _exit()s at
// once with 128 + signal. What a stop means for the job (finish or drop the request in flight, save state,
// release the ranks) is decided by the request loop (request_loop.cpp + StopControl below), never in the handler.
#pragma once
#include <atomic>
#include <chrono>

#include "lookahead/util/clock.h"

namespace la::cli {

// Installs the handlers for SIGINT and SIGTERM (SA_RESTART, so interrupted system calls resume).
void install_stop_handlers();
// 0, or the number of the first SIGINT/SIGTERM received (or passed to request_stop).
int stop_signal();
// The flag itself (for CommGroupOptions::stop_signal: workers report it to rank 0).
const std::atomic<int>& stop_signal_flag();
// A stop request that did not come through this process's handler (rank 0 told by a worker). The first wins.
void request_stop(int signal);
// The documented exit status of an interrupted run: 128 + signal (130 for SIGINT, 143 for SIGTERM).
int interrupted_exit_code(int signal);
// "SIGINT", "SIGTERM" or "signal N".
const char* signal_name(int signal);

// Rank 0's decision about the request in flight once a stop is requested: it is finished if it can be within
// `grace_s` seconds of the moment the loop first saw the stop, else cancelled at once (through GenParams::cancel,
// so it is never written half). on_step() is called after every step; its cost without a stop is one relaxed
// load.
class StopControl {
 public:
  explicit StopControl(double grace_s) : grace_s_(grace_s) {}
  // A request starts (its new-token budget: the estimate of what is left uses it as the upper bound).
  void begin_request(int max_new_tokens);
  // After a step with `new_tokens` generated so far in this request. Returns true the first time it sees the
  // stop (the caller then saves state right away, so a launcher's SIGKILL during the grace loses nothing but the
  // request in flight).
  bool on_step(int new_tokens) {
    if (stop_signal_flag().load(std::memory_order_relaxed) == 0) return false;
    return decide(new_tokens);
  }
  const std::atomic<bool>* cancel_flag() const { return &cancel_; }
  bool cancelled() const { return cancel_.load(std::memory_order_relaxed); }

 private:
  bool decide(int new_tokens);
  double grace_s_;
  int max_new_ = 0;
  Clock::time_point request_t0_{};
  bool seen_ = false;
  Clock::time_point seen_at_{};
  std::atomic<bool> cancel_{false};
};

}  // namespace la::cli
