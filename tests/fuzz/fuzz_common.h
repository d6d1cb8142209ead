// Shared by the libFuzzer targets (one translation unit each). The contract every target checks: a la::Error is a
// clean rejection of bad input; anything else (another exception, a crash, a sanitizer report, a leak, a hang, a
// broken invariant after a successful parse) fails the run.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace la::fuzz {

// A private scratch directory for parsers that read files ($TMPDIR/la-fuzz-<target>-<pid>), removed at exit.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::string d = std::string(t && *t ? t : "/tmp") + "/la-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    static const std::string keep = d;
    std::atexit([] { std::error_code ec; std::filesystem::remove_all(keep, ec); });
    return d;
  }();
  return dir;
}

// Writes bytes to scratch_dir()/name and returns the path.
inline std::string write_scratch(const std::string& name, const void* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  f.close();
  if (!f) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

// The state files end in a 64-bit FNV-1a checksum of what precedes it, which random mutations almost never get
// right: targets for them treat the input as the file body and append its checksum (the raw bytes are loaded
// too, so the truncation and checksum checks are fuzzed as well).
inline std::string with_checksum(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  const uint64_t h = la::fnv1a64(s.data(), s.size());
  s.append(reinterpret_cast<const char*>(&h), 8);
  return s;
}

// A file of the source tree (a fixed ingredient of a target, e.g. a valid tokenizer.model).
inline std::string read_source_file(const std::string& rel) {
  std::ifstream f(std::string(LA_SOURCE_DIR) + "/" + rel, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (s.empty()) {
    std::fprintf(stderr, "fuzz: cannot read %s/%s\n", LA_SOURCE_DIR, rel.c_str());
    std::abort();
  }
  return s;
}

// Runs f; la::Error is a clean rejection (printed when LA_FUZZ_VERBOSE is set, to check what seeds reach).
// Other exceptions escape (libFuzzer reports the abort).
template <class F>
void rejecting(F&& f) {
  static const bool verbose = std::getenv("LA_FUZZ_VERBOSE") != nullptr;
  try {
    f();
    if (verbose) std::fprintf(stderr, "fuzz: accepted\n");
  } catch (const la::Error& e) {
    if (verbose) std::fprintf(stderr, "fuzz: rejected: %s\n", e.what());
  }
}

// A property that must hold after a successful parse: a failure (any exception) aborts with the message.
template <class F>
void must(const char* what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: %s: %s\n", what, e.what());
    std::abort();
  }
}

[[noreturn]] inline void broken(const char* what) {
  std::fprintf(stderr, "fuzz: %s\n", what);
  std::abort();
}

}  // namespace la::fuzz
