#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace la {
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
// Whole file as bytes; throws la::Error naming the file.
std::string read_file(const std::string& path);
// The same for a state file: errors read "<what> '<path>': cannot open: <reason>" (e.g. "trie state file").
std::string read_file(const std::string& path, const char* what);
// Writes atomically: "<path>.tmp.<pid>" in the same directory, flushed to disk, then renamed over `path`.
// Errors name `what` (e.g. "trie state file") and the path.
void write_file_atomic(const std::string& path, const std::string& data, const char* what = "file");
// Fails, with write_file_atomic's wording, where it would fail to write `path` (a directory, no such directory, no
// permission, a read-only file system): it creates and removes the same temporary file. A run checks its output
// files so before any work, not after hours of it. Writes nothing to `path` itself.
void check_file_writable(const std::string& path, const char* what = "file");
// 64-bit FNV-1a (state-file checksums).
uint64_t fnv1a64(const char* p, size_t n);
}  // namespace la
