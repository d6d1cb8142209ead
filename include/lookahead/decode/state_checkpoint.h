// The persisted draft state of a strategy (--trie-state, --pool-state, --suffix-state): written atomically by
// Strategy::checkpoint(), which the driver calls after every finished request and at the end of a run, so a job
// killed at any moment (SIGKILL, a lost host, Open MPI's abort) keeps the state of every request it finished.
// A checkpoint writes only when the state changed since it was loaded or last written (a resumed job with
// nothing left to do rewrites nothing), and counts its writes, bytes and time for the stats.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace la {

class StateCheckpoint {
 public:
  // `writes` false: the file is loaded by the strategy but never written (another group's owner in a --lp-size job:
  // world rank 0 is the one writer, and its state takes in every group's finished requests).
  explicit StateCheckpoint(std::string path, bool writes = true) : path_(std::move(path)), writes_enabled_(writes) {}
  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // The state changed (a request ran, the pool learnt a phrase): the next checkpoint writes it.
  void changed() { dirty_ = true; }
  // Calls save(path) (the structure's atomic writer) when enabled and changed since the last write.
  void write_if_changed(const std::function<void(const std::string&)>& save);
  // "<prefix>_state_writes", "<prefix>_state_bytes" (the last write), "<prefix>_state_write_ms" (mean).
  void add_counters(std::map<std::string, double>& c, const std::string& prefix) const;

 private:
  std::string path_;
  bool writes_enabled_ = true;
  bool dirty_ = false;
  uint64_t writes_ = 0;
  uint64_t bytes_ = 0;
  double seconds_ = 0;
};

}  // namespace la
