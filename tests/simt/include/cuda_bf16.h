// SIMT emulation stand-in: __nv_bfloat16 as the top 16 bits of a float; conversion rounds to nearest even.
#pragma once
#include <cstdint>
#include <cstring>

#include "simt.h"

struct __nv_bfloat16 {
  unsigned short x;
};
inline float __bfloat162float(__nv_bfloat16 b) {
  const uint32_t u = uint32_t(b.x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  __nv_bfloat16 b;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    b.x = 0x7fc0;  // NaN
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    b.x = static_cast<unsigned short>(u >> 16);
  }
  return b;
}
