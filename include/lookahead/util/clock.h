// The one clock: durations in seconds on the steady (monotonic) clock, for load lines, reports, timeouts and
// state-file write times. Before this header every file that timed something wrote its own std::chrono
// arithmetic (seconds_since, a Backoff timer, per-class `using Clock` aliases). The cost model's thread-CPU clock
// stays with the cost model (decode/cost_model.h: CostClock), which is the only reader of it.
#pragma once
#include <chrono>

namespace la {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
inline double seconds_since(Clock::time_point t0) { return seconds_between(t0, Clock::now()); }

// Started at construction; seconds() since then.
class Stopwatch {
 public:
  double seconds() const { return seconds_since(t0_); }
  void restart() { t0_ = Clock::now(); }

 private:
  Clock::time_point t0_ = Clock::now();
};

}  // namespace la
