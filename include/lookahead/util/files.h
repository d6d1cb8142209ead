#pragma once
#include <string>

namespace la {
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
// Whole file as bytes; throws la::Error naming the file.
std::string read_file(const std::string& path);
// Writes atomically: a temporary file in the same directory, then rename.
void write_file_atomic(const std::string& path, const std::string& data);
}  // namespace la
