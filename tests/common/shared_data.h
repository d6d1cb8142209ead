// The shared/ folder of models and datasets: LA_SHARED in the environment overrides the build's path (a bundled
// test binary on another machine). Every suite reads the models through these (tests/common/).
#pragma once
#include <cstdlib>
#include <string>

namespace la::test {

inline std::string shared_dir() {
  const char* e = std::getenv("LA_SHARED");
  return e && *e ? e : LA_SHARED_DIR;
}
inline std::string stories() { return shared_dir() + "/models/stories260K"; }
inline std::string llama2xs() { return shared_dir() + "/models/llama2xs"; }

}  // namespace la::test
