#include "lookahead/util/state_file.h"

#include <cstring>

#include "lookahead/util/files.h"

namespace la {

std::string begin_state(const StateFormat& f, size_t reserve_bytes) {
  std::string s;
  s.reserve(reserve_bytes);
  s.append(f.magic, sizeof(f.magic));
  put<uint32_t>(s, f.version);
  return s;
}

void commit_state(const StateFormat& f, std::string& bytes, const std::string& path) {
  put<uint64_t>(bytes, fnv1a64(bytes.data(), bytes.size()));
  write_file_atomic(path, bytes, f.what);
}

StateFile::StateFile(const StateFormat& f, const std::string& path, size_t min_bytes)
    : f_(f), path_(path), s_(read_file(path, f.what)) {
  if (min_bytes < kStateHeaderBytes + kStateTrailerBytes) min_bytes = kStateHeaderBytes + kStateTrailerBytes;
  if (s_.size() < min_bytes) fail("truncated (", s_.size(), " bytes)");
  if (std::memcmp(s_.data(), f.magic, sizeof(f.magic)) != 0)
    fail("wrong magic (not a lookahead ", f.kind, " state file)");
  const uint32_t version = get<uint32_t>(s_, sizeof(f.magic));
  if (version != f.version) fail("unsupported version ", version, " (expected ", f.version, ")");
}

void StateFile::check_checksum() const {
  if (get<uint64_t>(s_, body_end()) != fnv1a64(s_.data(), body_end()))
    fail("checksum mismatch (corrupt or truncated)");
}

}  // namespace la
