// SIMT emulation stand-in: __half as IEEE binary16 bits; conversions round to nearest even (GCC's _Float16).
#pragma once
#include <cstring>

#include "simt.h"

struct __half {
  unsigned short x;
};
inline float __half2float(__half h) {
  _Float16 f;
  std::memcpy(&f, &h.x, 2);
  return static_cast<float>(f);
}
inline __half __float2half_rn(float v) {
  const _Float16 f = static_cast<_Float16>(v);
  __half h;
  std::memcpy(&h.x, &f, 2);
  return h;
}
