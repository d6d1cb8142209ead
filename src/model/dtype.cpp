// The exact fp16 <-> fp32 scalar conversions of lookahead/model/dtype.h (shared by the GGUF block formats in
// quant.cpp and the CPU kernels).
#include <cstring>

#include "lookahead/model/dtype.h"

namespace la {

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
