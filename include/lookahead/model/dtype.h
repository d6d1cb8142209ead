// Element types of weights and of the KV cache on the CPU, with exact scalar conversions (no libtorch).
// bf16 and fp16 widen to fp32 exactly; fp32 narrows with round-to-nearest-even, as the hardware converters do.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "lookahead/util/error.h"

namespace la {

enum class WType : uint8_t { F32, F16, BF16 };

inline int wtype_size(WType t) { return t == WType::F32 ? 4 : 2; }

// --dtype's one parser (the CLI's check, the KV cache sizing, the libtorch loader).
inline WType parse_dtype_name(const std::string& s) {
  if (s == "fp32") return WType::F32;
  if (s == "fp16") return WType::F16;
  if (s == "bf16") return WType::BF16;
  fail("invalid --dtype '", s, "' (expected fp32, fp16 or bf16)");
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays a (quiet) NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Element i of a vector of type t, widened to fp32.
inline float load_f32(const void* p, WType t, long i) {
  switch (t) {
    case WType::F32: return static_cast<const float*>(p)[i];
    case WType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case WType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.f;
}

inline void store_from_f32(void* p, WType t, long i, float v) {
  switch (t) {
    case WType::F32: static_cast<float*>(p)[i] = v; break;
    case WType::BF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); break;
    case WType::F16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); break;
  }
}

}  // namespace la
