// ISA detection and the LOOKAHEAD_CPU_ISA override (see include/lookahead/cpu/isa.h), and the fp16 conversions.
#include "lookahead/cpu/isa.h"

#include <atomic>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cstdlib>
#include <cstring>

#include "lookahead/cpu/dtype.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

CpuIsa from_env() {
  const char* e = std::getenv("LOOKAHEAD_CPU_ISA");
  if (!e || !*e) return detected_cpu_isa();
  const std::string s = e;
  if (s == "portable") return CpuIsa::Portable;
  LA_CHECK(s == "avx2", "LOOKAHEAD_CPU_ISA='", s, "' is not a CPU path (expected portable or avx2)");
  LA_CHECK(detected_cpu_isa() == CpuIsa::Avx2, "LOOKAHEAD_CPU_ISA=avx2, but this CPU lacks AVX2, FMA or F16C");
  return CpuIsa::Avx2;
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
  if (b & (1u << 5)) return CpuIsa::Avx2;
#endif
  return CpuIsa::Portable;
}

CpuIsa cpu_isa() { return static_cast<CpuIsa>(chosen().load(std::memory_order_relaxed)); }

void set_cpu_isa(CpuIsa isa) {
  LA_CHECK(isa == CpuIsa::Portable || detected_cpu_isa() == CpuIsa::Avx2,
           "set_cpu_isa: this CPU cannot run the AVX2 path");
  chosen().store(static_cast<int>(isa), std::memory_order_relaxed);
}

const char* cpu_isa_name(CpuIsa isa) { return isa == CpuIsa::Avx2 ? "avx2" : "portable"; }

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);  // inf / NaN
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      man <<= 1;
      ++e;
    } while (!(man & 0x400u));
    u = sign | uint32_t(112 - e) << 23 | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | uint16_t((a >> 13) & 0x3ffu);  // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;                                 // rounds to inf
  if (a < 0x38800000u) {                                                       // subnormal or zero in fp16
    if (a < 0x33000000u) return sign;                                          // below half the smallest subnormal
    const uint32_t man = (a & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(a >> 23);  // 14..24
    const uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    return sign | uint16_t(q + (rem > half || (rem == half && (q & 1u))));
  }
  const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);  // round to nearest even at bit 13
  return sign | uint16_t(((r >> 13) - (112u << 10)) & 0xffffu);
}

}  // namespace la
