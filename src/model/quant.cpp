// Dequantization of ggml block formats to fp32 (see include/lookahead/model/quant.h). One split per block type (its
// scales, offsets and integer codes, in ggml's element order); dequantization and the quantized GEMM's panels
// (gemm_quant.cpp) both start from it. Compiled with -ffp-contract=off (CMakeLists.txt: src/model/quant.cpp), so
// no product and sum are fused behind our back.
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

// Q4_0/Q4_1 (NIB) and Q5_0/Q5_1: d (, m) f16, (qh u32: bit j the fifth bit of element j,) qs[16]: element j the
// low nibble of qs[j], element j + 16 the high one; no min: the code is centred (-8 / -16).
template <bool NIB, bool MIN>
void split_legacy(const uint8_t* b, float* A, float* B, int* code) {
  A[0] = half(b);
  B[0] = MIN ? half(b + 2) : -0.0f;
  uint32_t qh = 0;
  if (!NIB) std::memcpy(&qh, b + (MIN ? 4 : 2), 4);
  const uint8_t* qs = b + (MIN ? 4 : 2) + (NIB ? 0 : 4);
  const int zero = MIN ? 0 : NIB ? 8 : 16;
  for (int j = 0; j < 16; ++j) {
    code[j] = int((qs[j] & 0xF) | (((qh >> j) & 1u) << 4)) - zero;
    code[j + 16] = int((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - zero;
  }
}

// Q4_K/Q5_K: d, dmin f16, scales[12], (Q5_K: qh[32],) qs[128]: 4 x (32 low nibbles, 32 high), sub-block 2g the low
// nibbles of chunk g, 2g + 1 its high nibbles (fifth bits: bit 2g / 2g + 1 of qh[l]). A = d * scale,
// B = -(dmin * min): y = A * q + B is ggml's d1 * q - m1 to the bit.
template <bool FIVE>
void split_k(const uint8_t* b, float* A, float* B, int* code) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + (FIVE ? 48 : 16);
  for (int g = 0; g < 8; ++g) {
    int s, m;
    scale_min_k4(g, sc, s, m);
    A[g] = d * float(s);
    B[g] = -(dmin * float(m));
  }
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l) {
      int lo = q[32 * g + l] & 0xF, hi = q[32 * g + l] >> 4;
      if (FIVE) lo |= ((qh[l] >> (2 * g)) & 1) << 4, hi |= ((qh[l] >> (2 * g + 1)) & 1) << 4;
      code[64 * g + l] = lo;
      code[64 * g + 32 + l] = hi;
    }
}

void split_q8_0(const uint8_t* b, float* A, float* B, int* code) {  // d f16, qs[32] int8
  A[0] = half(b);
  B[0] = -0.0f;
  for (int j = 0; j < 32; ++j) code[j] = static_cast<int8_t>(b[2 + j]);
}

// Q6_K: ql[128], qh[64], scales[16] int8, d f16; two halves of 128 elements, each 4 x 32 from ql's nibbles and
// qh's bit pairs, centred by -32; sub-block of 16 elements g has A = d * scales[g] (ggml: (d * sc) * q).
void split_q6_k(const uint8_t* b, float* A, float* B, int* code) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* S = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int g = 0; g < 16; ++g) A[g] = d * float(S[g]), B[g] = -0.0f;
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* L = ql + 64 * h;
      const uint8_t H = qh[32 * h + l];
      int* c = code + 128 * h;
      c[l] = int((L[l] & 0xF) | ((H & 3) << 4)) - 32;
      c[l + 32] = int((L[l + 32] & 0xF) | (((H >> 2) & 3) << 4)) - 32;
      c[l + 64] = int((L[l] >> 4) | (((H >> 4) & 3) << 4)) - 32;
      c[l + 96] = int((L[l + 32] >> 4) | (((H >> 6) & 3) << 4)) - 32;
    }
}

using SplitFn = void (*)(const uint8_t*, float*, float*, int*);

SplitFn split_of(uint32_t t) {
  switch (static_cast<QType>(t)) {
    case QType::Q4_0: return split_legacy<true, false>;
    case QType::Q4_1: return split_legacy<true, true>;
    case QType::Q5_0: return split_legacy<false, false>;
    case QType::Q5_1: return split_legacy<false, true>;
    case QType::Q8_0: return split_q8_0;
    case QType::Q4_K: return split_k<false>;
    case QType::Q5_K: return split_k<true>;
    case QType::Q6_K: return split_q6_k;
    default: return nullptr;
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
  const SplitFn split = split_of(t);
  if (!split) return;  // callers check qtype_info(t).dequantizable
  const QTypeInfo info = qtype_info(t);
  const int group = quant_group(t);
  float A[16], B[16];
  int code[256];
  for (int64_t i = 0; i < n / info.block; ++i) {
    split(s + i * info.bytes, A, B, code);
    float* y = dst + i * info.block;
    for (int j = 0; j < info.block; ++j) y[j] = A[j / group] * float(code[j]) + B[j / group];
  }
}

int quant_group(uint32_t t) {
  if (!split_of(t)) return 0;
  return t == uint32_t(QType::Q6_K) ? 16 : 32;
}

void split_block(uint32_t t, const uint8_t* block, float* A, float* B, int* code) {
  const SplitFn split = split_of(t);
  if (split) split(block, A, B, code);
}

}  // namespace la
