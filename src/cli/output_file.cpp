// --output JSONL handling (see output_file.h): the refuse-to-clobber check, --resume's reading and truncation, and
// one write(2) per record. POSIX file calls by hand: std::ofstream may split a long line over several writes.
#include "output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "lookahead/io/prompt_records.h"

namespace la::cli {

using json = nlohmann::json;

std::string id_key(const json& id) { return id.dump(-1, ' ', false, json::error_handler_t::replace); }

JsonlOutput::JsonlOutput(const std::string& path, OutputMode mode) : path_(path) {
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  const bool regular = exists && S_ISREG(st.st_mode);
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
  if (mode == OutputMode::Fresh) {
    LA_CHECK(!(regular && st.st_size > 0), "--output '", path, "' already exists and is not empty (pass --resume ",
             "to continue it, or --overwrite to replace it)");
    flags |= O_TRUNC;
  } else if (mode == OutputMode::Overwrite) {
    flags |= O_TRUNC;
  } else if (regular && st.st_size > 0) {
    const std::string text = read_file(path);
    size_t pos = 0, keep = 0;
    int line = 0;
    while (pos < text.size()) {
      const size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) break;  // the last line was cut short: dropped below
      ++line;
      const std::string_view l(text.data() + pos, nl - pos);
      json rec;
      const OutputLine kind = parse_output_record(l, rec);  // the checked reader (io/prompt_records)
      LA_CHECK(kind != OutputLine::NotJson, "--resume: '", path, "' line ", line, " is not valid JSON (not written by ",
               "lookahead? use --overwrite to replace the file)");
      LA_CHECK(kind != OutputLine::NoId, "--resume: '", path, "' line ", line, " is not a record with an \"id\"");
      if (kind == OutputLine::Record) {
        std::string key = id_key(rec["id"]);  // before the move: `a[f(x)] = move(x)` evaluates the right side first
        done_[std::move(key)] = std::move(rec);
      }
      pos = nl + 1;
      keep = pos;
    }
    dropped_ = text.size() - keep;
    if (dropped_ > 0 && ::truncate(path.c_str(), static_cast<off_t>(keep)) != 0)
      fail("--resume: cannot truncate the partial last line of '", path, "': ", std::strerror(errno));
    flags |= O_APPEND;
  }
  fd_ = ::open(path.c_str(), flags, 0644);
  LA_CHECK(fd_ >= 0, "cannot write --output '", path, "': ", std::strerror(errno));
}

JsonlOutput& JsonlOutput::operator=(JsonlOutput&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    done_ = std::move(o.done_);
    dropped_ = o.dropped_;
  }
  return *this;
}

JsonlOutput::~JsonlOutput() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonlOutput::write(const json& record) {
  const std::string line = record.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t w = ::write(fd_, line.data() + off, line.size() - off);
    if (w < 0 && errno == EINTR) continue;
    LA_CHECK(w > 0, "writing --output '", path_, "' failed: ", w < 0 ? std::strerror(errno) : "no space written");
    off += static_cast<size_t>(w);
  }
}

}  // namespace la::cli
