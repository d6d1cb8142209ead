// Dequantization of ggml block formats to fp32 (see include/lookahead/model/quant.h). One function per block type,
// each following the element order and the rounding steps of ggml's reference dequantizer; compiled with
// -ffp-contract=off (CMakeLists.txt: every src/backend/cpu file), so no product and sum are fused behind our back.
#include "lookahead/model/quant.h"

#include <cstdio>
#include <cstring>

#include "lookahead/model/dtype.h"

namespace la {
namespace {

struct Named {
  uint32_t t;
  QTypeInfo info;
};

// Every ggml type of GGUF files as of gguf-py 0.19, by number (names and block sizes from the format), so that a
// file using one we cannot dequantize is refused naming it.
constexpr Named kTypes[] = {
    {0, {"F32", 1, 4, true}},          {1, {"F16", 1, 2, true}},         {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, true}},       {6, {"Q5_0", 32, 22, true}},      {7, {"Q5_1", 32, 24, true}},
    {8, {"Q8_0", 32, 34, true}},       {9, {"Q8_1", 32, 40, false}},     {10, {"Q2_K", 256, 84, false}},
    {11, {"Q3_K", 256, 110, false}},   {12, {"Q4_K", 256, 144, true}},   {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}},    {15, {"Q8_K", 256, 292, false}},  {16, {"IQ2_XXS", 256, 66, false}},
    {17, {"IQ2_XS", 256, 74, false}},  {18, {"IQ3_XXS", 256, 98, false}}, {19, {"IQ1_S", 256, 50, false}},
    {20, {"IQ4_NL", 32, 18, false}},   {21, {"IQ3_S", 256, 110, false}}, {22, {"IQ2_S", 256, 82, false}},
    {23, {"IQ4_XS", 256, 136, false}}, {24, {"I8", 1, 1, false}},        {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},        {27, {"I64", 1, 8, false}},       {28, {"F64", 1, 8, false}},
    {29, {"IQ1_M", 256, 56, false}},   {30, {"BF16", 1, 2, true}},       {34, {"TQ1_0", 256, 54, false}},
    {35, {"TQ2_0", 256, 66, false}},   {39, {"MXFP4", 32, 17, false}},   {40, {"NVFP4", 64, 36, false}},
    {41, {"Q1_0", 128, 18, false}},
};

inline float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

void deq_q4_0(const uint8_t* b, float* y) {  // d f16, qs[16]: element j low nibble, j + 16 high nibble
  const float d = half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(int(qs[j] & 0xF) - 8);
    y[j + 16] = d * float(int(qs[j] >> 4) - 8);
  }
}

void deq_q4_1(const uint8_t* b, float* y) {  // d, m f16, qs[16]
  const float d = half(b), m = half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(qs[j] & 0xF) + m;
    y[j + 16] = d * float(qs[j] >> 4) + m;
  }
}

void deq_q5_0(const uint8_t* b, float* y) {  // d f16, qh u32 (bit j: fifth bit of element j), qs[16]
  const float d = half(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int lo = int(qs[j] & 0xF) | int(((qh >> j) & 1u) << 4);
    const int hi = int(qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * float(lo - 16);
    y[j + 16] = d * float(hi - 16);
  }
}

void deq_q5_1(const uint8_t* b, float* y) {  // d, m f16, qh u32, qs[16]
  const float d = half(b), m = half(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int lo = int(qs[j] & 0xF) | int(((qh >> j) & 1u) << 4);
    const int hi = int(qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * float(lo) + m;
    y[j + 16] = d * float(hi) + m;
  }
}

void deq_q8_0(const uint8_t* b, float* y) {  // d f16, qs[32] int8
  const float d = half(b);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * float(qs[j]);
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block from its 12 packed bytes: bytes 0-3 hold
// scales 0-3 (low 6 bits) and the high bits of scales 4-7; bytes 4-7 the mins 0-3 and high bits of mins 4-7;
// bytes 8-11 the low 4 bits of scale (low nibble) and min (high nibble) of sub-blocks 4-7.
inline void scale_min_k4(int j, const uint8_t* s, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void deq_q4_k(const uint8_t* b, float* y) {  // d, dmin f16, scales[12], qs[128]: 4 x (32 low nibbles, 32 high)
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* q = b + 16;
  for (int g = 0; g < 4; ++g) {
    int s0, m0, s1, m1;
    scale_min_k4(2 * g, sc, s0, m0);
    scale_min_k4(2 * g + 1, sc, s1, m1);
    const float d0 = d * float(s0), dm0 = dmin * float(m0), d1 = d * float(s1), dm1 = dmin * float(m1);
    for (int l = 0; l < 32; ++l) {
      y[64 * g + l] = d0 * float(q[32 * g + l] & 0xF) - dm0;
      y[64 * g + 32 + l] = d1 * float(q[32 * g + l] >> 4) - dm1;
    }
  }
}

void deq_q5_k(const uint8_t* b, float* y) {  // d, dmin, scales[12], qh[32], qs[128]
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + 48;
  for (int g = 0; g < 4; ++g) {
    int s0, m0, s1, m1;
    scale_min_k4(2 * g, sc, s0, m0);
    scale_min_k4(2 * g + 1, sc, s1, m1);
    const float d0 = d * float(s0), dm0 = dmin * float(m0), d1 = d * float(s1), dm1 = dmin * float(m1);
    for (int l = 0; l < 32; ++l) {
      const int lo = int(q[32 * g + l] & 0xF) | (((qh[l] >> (2 * g)) & 1) << 4);
      const int hi = int(q[32 * g + l] >> 4) | (((qh[l] >> (2 * g + 1)) & 1) << 4);
      y[64 * g + l] = d0 * float(lo) - dm0;
      y[64 * g + 32 + l] = d1 * float(hi) - dm1;
    }
  }
}

void deq_q6_k(const uint8_t* b, float* y) {  // ql[128], qh[64], scales[16] int8, d f16
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int h = 0; h < 2; ++h) {  // two halves of 128 elements
    const uint8_t* L = ql + 64 * h;
    const uint8_t* H = qh + 32 * h;
    const int8_t* S = sc + 8 * h;
    float* Y = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((L[l] & 0xF) | ((H[l] & 3) << 4)) - 32;
      const int q2 = int((L[l + 32] & 0xF) | (((H[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32;
      Y[l] = (d * float(S[is])) * float(q1);
      Y[l + 32] = (d * float(S[is + 2])) * float(q2);
      Y[l + 64] = (d * float(S[is + 4])) * float(q3);
      Y[l + 96] = (d * float(S[is + 6])) * float(q4);
    }
  }
}

}  // namespace

QTypeInfo qtype_info(uint32_t t) {
  for (const auto& n : kTypes)
    if (n.t == t) return n.info;
  return {};
}

const char* qtype_name(uint32_t t) {
  static thread_local char buf[24];
  const QTypeInfo i = qtype_info(t);
  if (i.name) return i.name;
  std::snprintf(buf, sizeof buf, "type %u", t);
  return buf;
}

void dequantize_row(uint32_t t, const void* src, float* dst, int64_t n) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  switch (static_cast<QType>(t)) {
    case QType::F32: std::memcpy(dst, s, size_t(n) * 4); return;
    case QType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = half(s + 2 * i);
      return;
    case QType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    default: break;
  }
  void (*f)(const uint8_t*, float*) = nullptr;
  switch (static_cast<QType>(t)) {
    case QType::Q4_0: f = deq_q4_0; break;
    case QType::Q4_1: f = deq_q4_1; break;
    case QType::Q5_0: f = deq_q5_0; break;
    case QType::Q5_1: f = deq_q5_1; break;
    case QType::Q8_0: f = deq_q8_0; break;
    case QType::Q4_K: f = deq_q4_k; break;
    case QType::Q5_K: f = deq_q5_k; break;
    case QType::Q6_K: f = deq_q6_k; break;
    default: return;  // callers check qtype_info(t).dequantizable
  }
  const QTypeInfo info = qtype_info(t);
  for (int64_t i = 0; i < n / info.block; ++i) f(s + i * info.bytes, dst + i * info.block);
}

}  // namespace la
