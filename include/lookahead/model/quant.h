// The block formats of GGUF tensors (ggml's types, by their numbers in the file): sizes, names, and dequantization
// of whole rows to fp32. No libtorch. Written from the GGUF specification and ggml's block layouts, checked against
// the `gguf` Python package's numpy dequantizer (tests/scripts/test_gguf.sh: bit-identical for every type here).
//
// Every element is dequantized with the operations of ggml's reference (dequantize_row_*): e.g. Q4_K computes
// d1 = d * scale, m1 = dmin * min, then y = d1 * q - m1, each rounded to fp32 (this file is compiled with
// -ffp-contract=off), so the values equal llama.cpp's and transformers' (which uses that numpy code) bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

namespace la {

// ggml type numbers as stored in GGUF tensor infos.
enum class QType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};

struct QTypeInfo {
  const char* name = nullptr;  // "Q4_K"; nullptr for a number ggml does not define (or one not listed here)
  int block = 0;               // elements per block
  int bytes = 0;               // bytes per block
  bool dequantizable = false;  // dequantize_row handles it
};

// What is known of ggml type number `t` (name and block size for every ggml type up to 41, so that an unsupported
// one is refused by name).
QTypeInfo qtype_info(uint32_t t);
// "Q4_K", or "type 99" for an unknown number.
const char* qtype_name(uint32_t t);

// Dequantizes n elements (a multiple of the type's block size) of type t from `src` into dst (fp32). `t` must be
// dequantizable (callers check qtype_info first).
void dequantize_row(uint32_t t, const void* src, float* dst, int64_t n);

// The one per-type decoding both dequantize_row and the quantized GEMM's packing use (gemm_quant.h). A block of a
// quantized type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) is groups of quant_group(t) elements (32; 16 for
// Q6_K; 0 for other types) with a scale A[g] and offset B[g] each, and an integer code per element: element j is
// A[j / group] * float(code[j]) + B[j / group], ggml's reference value to the bit (A and B are its intermediate
// products; B = -0.0 where the type has no offset, which leaves the product unchanged; Q4_K/Q5_K's y = A * q + B
// equals ggml's d1 * q - m1 for every non-NaN m1: only a NaN dmin, absent from real files, keeps another sign). A and B get block / group
// entries, code gets block entries; codes are signed (Q4_0: -8..7; Q4_1, Q4_K: 0..15).
int quant_group(uint32_t t);
void split_block(uint32_t t, const uint8_t* block, float* A, float* B, int* code);

}  // namespace la
