// Progress lines for `lookahead generate --input` (see progress.h).
#include "progress.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace la::cli {
namespace {

std::string hms(double s) {
  if (!(s >= 0) || s > 99 * 3600.0) return "?";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return buf;
}

std::string count(uint64_t n) {
  char buf[32];
  if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else if (n >= 10000) std::snprintf(buf, sizeof buf, "%.1fk", n / 1e3);
  else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  return buf;
}

}  // namespace

Progress::Progress(size_t total, size_t already_done, double interval_s, bool enabled, std::string tag)
    : enabled_(enabled && interval_s > 0), tty_(::isatty(STDERR_FILENO) == 1), interval_s_(interval_s),
      total_(total), done_(already_done), t0_(Clock::now()), tag_(std::move(tag)) {
  next_ = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(tty_ ? 0.25 : interval_s_));
}

std::string Progress::line(int request_tokens) const {
  const double el = seconds_since(t0_);
  const uint64_t tok = tokens_ + static_cast<uint64_t>(request_tokens > 0 ? request_tokens : 0);
  const double tps = el > 0 ? tok / el : 0.0;
  const size_t left = total_ > done_ ? total_ - done_ : 0;
  const double eta = done_here_ > 0 ? el / done_here_ * left : -1.0;
  char flight[32] = "";
  if (in_flight_ > 1) std::snprintf(flight, sizeof flight, ", %d in flight", in_flight_);
  char buf[288];
  std::snprintf(buf, sizeof buf, "%s%zu/%zu prompts (%.0f%%)%s, %s tokens, %.1f tokens/s, elapsed %s, left ~%s",
                tag_.c_str(), done_, total_, total_ ? 100.0 * done_ / total_ : 100.0, flight, count(tok).c_str(), tps, hms(el).c_str(),
                left == 0 ? "0:00:00" : hms(eta).c_str());
  return buf;
}

void Progress::print(int request_tokens) {
  const std::string l = line(request_tokens);
  if (tty_) std::fprintf(stderr, "\r%s\033[K", l.c_str());
  else std::fprintf(stderr, "%s\n", l.c_str());
  std::fflush(stderr);
  printed_ = true;
  next_ = Clock::now() +
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(tty_ ? 0.25 : interval_s_));
}

void Progress::request_done(int new_tokens) {
  ++done_;
  ++done_here_;
  tokens_ += static_cast<uint64_t>(new_tokens > 0 ? new_tokens : 0);
  if (enabled_ && Clock::now() >= next_) print(0);
}

void Progress::finish() {
  if (!enabled_) return;
  if (tty_) {
    print(0);  // the final state, then end the line
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }
}

}  // namespace la::cli
