// The one framing of every draft state file (trie, suffix tree, phrase pool: --trie-state, --suffix-state,
// --ouroboros-state). Each file is
//   8-byte magic | u32 version | body (the structure's own layout) | u64 FNV-1a of every byte before it,
// in host order (a file is resumed on the machine kind that wrote it; it is not an exchange format), and is written
// atomically (write_file_atomic), so a crash mid-write leaves the old file. Before this header each structure kept
// its own copy of the header, checksum and error wording; the layouts are unchanged byte for byte
// (tests/core/test_draft_*.cpp, tests/fuzz/fuzz_*_state.cpp, tests/scripts/test_checkpoint.sh).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "lookahead/util/binary.h"
#include "lookahead/util/error.h"

namespace la {

struct StateFormat {
  const char* what;   // "trie state file": every error reads "<what> '<path>': ..."
  const char* kind;   // "trie": a foreign file is "not a lookahead <kind> state file"
  char magic[8];
  uint32_t version;
};

constexpr size_t kStateHeaderBytes = 8 + 4;  // magic, version
constexpr size_t kStateTrailerBytes = 8;     // checksum

// Writing: begin_state() returns the header; the caller appends its body with put<T>(); commit_state() appends the
// checksum and writes the file atomically.
std::string begin_state(const StateFormat& f, size_t reserve_bytes = 0);
void commit_state(const StateFormat& f, std::string& bytes, const std::string& path);

// Reading: the constructor reads the file and checks its size (at least `min_bytes`, trailer included), magic and
// version; check_checksum() is separate so a layout can first refuse a size that does not match its own counts (the
// trie reports "truncated" for a cut file, not "checksum mismatch"). body_end() excludes the trailer.
class StateFile {
 public:
  StateFile(const StateFormat& f, const std::string& path, size_t min_bytes);
  void check_checksum() const;

  const std::string& bytes() const { return s_; }
  size_t body_end() const { return s_.size() - kStateTrailerBytes; }
  template <class T>
  T at(size_t off) const {  // the caller keeps off + sizeof(T) <= body_end()
    return get<T>(s_, off);
  }
  // A bounded cursor over the body, starting after the header: "truncated at byte N" past body_end().
  template <class T>
  T next() {
    if (body_end() - off_ < sizeof(T)) fail("truncated at byte ", off_);
    const T v = get<T>(s_, off_);
    off_ += sizeof(T);
    return v;
  }
  size_t offset() const { return off_; }
  size_t left() const { return body_end() - off_; }

  template <class... A>
  [[noreturn]] void fail(const A&... a) const {
    la::fail(f_.what, " '", path_, "': ", a...);
  }

 private:
  const StateFormat& f_;
  const std::string& path_;
  std::string s_;
  size_t off_ = kStateHeaderBytes;
};

}  // namespace la
