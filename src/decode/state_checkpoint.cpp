#include "lookahead/decode/state_checkpoint.h"
#include "lookahead/util/clock.h"

#include <filesystem>

namespace la {

void StateCheckpoint::write_if_changed(const std::function<void(const std::string&)>& save) {
  if (path_.empty() || !writes_enabled_ || !dirty_) return;
  const Stopwatch watch;
  save(path_);
  seconds_ += watch.seconds();
  dirty_ = false;  // only once written: a failed write (la::Error) is retried by the next checkpoint
  ++writes_;
  std::error_code ec;
  const auto n = std::filesystem::file_size(path_, ec);
  bytes_ = ec ? 0 : static_cast<uint64_t>(n);
}

void StateCheckpoint::add_counters(std::map<std::string, double>& c, const std::string& prefix) const {
  if (path_.empty()) return;
  c[prefix + "_state_writes"] = static_cast<double>(writes_);
  c[prefix + "_state_bytes"] = static_cast<double>(bytes_);
  c[prefix + "_state_write_ms"] = writes_ ? seconds_ * 1e3 / static_cast<double>(writes_) : 0.0;
}

}  // namespace la
