// Little helpers for the state files' binary layouts (trie, suffix tree): values appended to and read from a byte
// string in host order (the files record their own version and checksum; they are not an exchange format).
#pragma once
#include <cstddef>
#include <cstring>
#include <string>

namespace la {

template <class T>
void put(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}

// The caller checks that off + sizeof(T) <= s.size().
template <class T>
T get(const std::string& s, size_t off) {
  T v;
  std::memcpy(&v, s.data() + off, sizeof(T));
  return v;
}

}  // namespace la
