// Error type used everywhere: one clear message, caught in main() and printed as one line.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace la {

struct Error : std::runtime_error {
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... A>
std::string cat(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}
}  // namespace detail

template <class... A>
[[noreturn]] void fail(const A&... a) {
  throw Error(detail::cat(a...));
}

}  // namespace la

#define LA_CHECK(cond, ...)                 \
  do {                                      \
    if (!(cond)) ::la::fail(__VA_ARGS__);   \
  } while (0)
