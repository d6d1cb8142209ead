// ISA detection and the LOOKAHEAD_CPU_ISA override (see include/lookahead/backend/cpu/isa.h).
#include "lookahead/backend/cpu/isa.h"

#include <atomic>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cstdlib>

#include "lookahead/util/error.h"

namespace la {
namespace {

CpuIsa from_env() {
  const char* e = std::getenv("LOOKAHEAD_CPU_ISA");
  if (!e || !*e) return detected_cpu_isa();
  const std::string s = e;
  if (s == "portable") return CpuIsa::Portable;
  LA_CHECK(s == "avx2" || s == "avx512", "LOOKAHEAD_CPU_ISA='", s,
           "' is not a CPU path (expected portable, avx2 or avx512)");
  const CpuIsa want = s == "avx2" ? CpuIsa::Avx2 : CpuIsa::Avx512;
  LA_CHECK(detected_cpu_isa() >= want, "LOOKAHEAD_CPU_ISA=", s, ", but this CPU lacks ",
           want == CpuIsa::Avx2 ? "AVX2, FMA or F16C" : "AVX-512F (or the OS does not save its registers)");
  return want;
}

std::atomic<int>& chosen() {
  static std::atomic<int> isa{static_cast<int>(from_env())};
  return isa;
}

}  // namespace

// CPUID and XGETBV directly: clang 14 (the fuzz build) has no "f16c" for __builtin_cpu_supports.
CpuIsa detected_cpu_isa() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return CpuIsa::Portable;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
  if (!(fma && osxsave && avx && f16c)) return CpuIsa::Portable;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 6u) != 6u) return CpuIsa::Portable;  // the OS saves XMM and YMM state
  if (__get_cpuid_max(0, nullptr) < 7) return CpuIsa::Portable;
  __cpuid_count(7, 0, a, b, c, d);
  if (!(b & (1u << 5))) return CpuIsa::Portable;
  // AVX-512F, and the OS saves the opmask and the upper halves of all 32 vector registers (XCR0 bits 5-7).
  if ((b & (1u << 16)) && (lo & 0xE0u) == 0xE0u) return CpuIsa::Avx512;
  return CpuIsa::Avx2;
#endif
  return CpuIsa::Portable;
}

CpuIsa cpu_isa() { return static_cast<CpuIsa>(chosen().load(std::memory_order_relaxed)); }

void set_cpu_isa(CpuIsa isa) {
  LA_CHECK(isa <= detected_cpu_isa(), "set_cpu_isa: this CPU cannot run the ", cpu_isa_name(isa), " path");
  chosen().store(static_cast<int>(isa), std::memory_order_relaxed);
}

const char* cpu_isa_name(CpuIsa isa) {
  return isa == CpuIsa::Avx512 ? "avx512" : isa == CpuIsa::Avx2 ? "avx2" : "portable";
}

}  // namespace la
