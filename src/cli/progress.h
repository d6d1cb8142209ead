// Progress of a long --input run on stderr (rank 0 only; --quiet or --progress-interval 0 turn it off):
//   [lookahead] 250/1000 prompts (25%), 48.0k tokens, 2345.6 tokens/s, elapsed 0:00:21, left ~0:01:03
// On a terminal one line is rewritten in place (\r, at most 4 times a second); otherwise (Slurm logs, files) a
// plain line is printed every `interval_s` seconds. Prompts skipped by --resume count as done; the rates and the
// time left use this run's prompts only.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "lookahead/util/clock.h"

namespace la::cli {

class Progress {
 public:
  // total: prompts in the input; already_done: prompts --resume skips; interval_s <= 0 disables the lines.
  Progress(size_t total, size_t already_done, double interval_s, bool enabled, std::string tag = "[lookahead] ");
  // After every step of a request: tokens generated so far in it. Cheap unless a line is due.
  void step(int request_tokens) {
    if (!enabled_) return;
    if (Clock::now() >= next_) print(request_tokens);
  }
  void request_done(int new_tokens);
  // Requests in flight (continuous batching): shown in the line when above one.
  void set_in_flight(int n) { in_flight_ = n; }
  // Ends the run: terminates the in-place line on a terminal.
  void finish();
  // The status line (exposed for tests).
  std::string line(int request_tokens) const;

 private:
  void print(int request_tokens);
  bool enabled_, tty_;
  double interval_s_;
  size_t total_, done_, done_here_ = 0;
  uint64_t tokens_ = 0;
  Clock::time_point t0_, next_;
  bool printed_ = false;
  int in_flight_ = 0;
  std::string tag_;
};

}  // namespace la::cli
