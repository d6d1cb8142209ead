// The CPU kernels' ISA paths in tests: every path this CPU can run, and a guard that restores the path a test set.
#pragma once
#include <vector>

#include "lookahead/backend/cpu/isa.h"

namespace la::test {

// Restores the ISA path a test changed.
struct IsaGuard {
  CpuIsa saved = cpu_isa();
  ~IsaGuard() { set_cpu_isa(saved); }
};

// The portable path, and AVX2 and AVX-512 when this CPU has them.
inline std::vector<CpuIsa> isa_paths() {
  std::vector<CpuIsa> v{CpuIsa::Portable};
  if (detected_cpu_isa() >= CpuIsa::Avx2) v.push_back(CpuIsa::Avx2);
  if (detected_cpu_isa() >= CpuIsa::Avx512) v.push_back(CpuIsa::Avx512);
  return v;
}

}  // namespace la::test
