#include "lookahead/util/files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "lookahead/util/error.h"

namespace la {

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LA_CHECK(in.good(), "cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  LA_CHECK(!in.bad(), "cannot read '", path, "'");
  return ss.str();
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(what, " '", path, "': cannot open: ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(what, " '", path, "': read error");
  return ss.str();
}

namespace {
// The temporary file write_file_atomic writes before its rename (check_file_writable creates the same one).
std::string temp_path(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }
}  // namespace

void check_file_writable(const std::string& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) fail(what, " '", path, "': is a directory");
    if (S_ISFIFO(st.st_mode)) return;  // opening it would wait for a reader
    FILE* f = std::fopen(path.c_str(), "ab");  // a device is written in place (below): no truncation here
    if (!f) fail(what, " '", path, "': cannot open: ", std::strerror(errno));
    std::fclose(f);
    return;
  }
  const std::string tmp = temp_path(path);
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(what, " '", path, "': cannot create '", tmp, "': ", std::strerror(errno));
  std::fclose(f);
  std::remove(tmp.c_str());
}

// A path that exists and is not a regular file (/dev/null, /dev/stdout, a FIFO) is written in place: renaming a
// temporary file over it would replace the device with a regular file (as root, /dev/null itself: a stats file
// written to /dev/null once turned the machine's /dev/null into a file that every later '> /dev/null' filled).
void write_file_atomic(const std::string& path, const std::string& data, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) fail(what, " '", path, "': is a directory");
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) fail(what, " '", path, "': cannot open: ", std::strerror(errno));
    bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
    const int err = errno;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) fail(what, " '", path, "': write failed: ", std::strerror(err));
    return;
  }
  const std::string tmp = temp_path(path);
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(what, " '", path, "': cannot create '", tmp, "': ", std::strerror(errno));
  bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(::fileno(f)) == 0 && ok;
  const int err = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    fail(what, " '", path, "': write failed: ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    fail(what, " '", path, "': cannot rename '", tmp, "' over it: ", std::strerror(e));
  }
}

uint64_t fnv1a64(const char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace la
