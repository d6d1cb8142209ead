// The --output JSONL file of `lookahead generate`: never clobbered by accident, resumable, never half-written.
//
// * Fresh (default): an existing non-empty regular file is an error naming it (pass --resume or --overwrite).
// * Overwrite: the file is replaced.
// * Resume: the existing records are read; every complete line must be a JSON object with an "id" (else an error
//   naming the line); a last line without its newline (the process was killed while writing it) is dropped, the
//   file truncated there, and new records are appended. done() holds the ids already written (as compact JSON),
//   and records() the kept records themselves.
// Every record is written with one write(2) of the whole line and flushed to the kernel at once, so a run that is
// stopped or killed leaves only whole lines behind.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>

namespace la::cli {

enum class OutputMode { Fresh, Overwrite, Resume };

class JsonlOutput {
 public:
  JsonlOutput() = default;
  JsonlOutput(const std::string& path, OutputMode mode);
  ~JsonlOutput();
  JsonlOutput(const JsonlOutput&) = delete;
  JsonlOutput& operator=(const JsonlOutput&) = delete;
  JsonlOutput& operator=(JsonlOutput&& o) noexcept;

  bool is_open() const { return fd_ >= 0; }
  // id (compact JSON) -> the record already in the file (Resume only).
  const std::unordered_map<std::string, nlohmann::json>& done() const { return done_; }
  size_t dropped_bytes() const { return dropped_; }  // bytes of a truncated last line that was removed
  void write(const nlohmann::json& record);           // throws la::Error naming the file on failure

 private:
  std::string path_;
  int fd_ = -1;
  std::unordered_map<std::string, nlohmann::json> done_;
  size_t dropped_ = 0;
};

// The key a record's id is matched by (compact JSON of the id value).
std::string id_key(const nlohmann::json& id);

}  // namespace la::cli
