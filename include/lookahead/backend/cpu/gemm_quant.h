// The GEMM of include/lookahead/backend/cpu/gemm.h over weights that stay quantized: GGUF block types Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q4_K, Q5_K and Q6_K, repacked once at load into 8-row panels (no libtorch).
//
// Layout. Each panel of 8 weight rows is a run of groups of G consecutive k (G = 32; 16 for Q6_K, whose scales
// cover 16 elements); a group holds, for its 8 rows, the fp32 scale A[8], the fp32 offset B[8] (types with a min:
// Q4_1, Q5_1, Q4_K, Q5_K) and then, k by k, the 8 rows' integer codes side by side (4-bit types: one uint32 with
// row r in bits 4r..4r+3; others: 8 int8). Weight (row r, k) is A[r] * float(code) + B[r], exactly the value
// dequantize_row gives (A and B are its intermediate products, formed at pack time with the same fp32 operations,
// e.g. Q4_K: A = d * scale, B = -(dmin * min); -0.0 stands for "no offset"), so the kernel widens a group in
// registers instead of reading fp32 weights: 0.5-1 byte per weight streamed instead of 4.
//
// Batch invariance: every output y[t][n] is computed by one thread alone as
//   s = 0;  s = fma(w[n][k], x[t][k], s)   for k = 0, 1, ..., K-1, in order   (w[n][k] widened as above)
//   y[t][n] = (s + bias[n]) (+ y[t][n] with accumulate)
// in one lane of one accumulator, whatever M is (the tile's width of token rows), whatever the thread count and
// the ISA path (AVX2, AVX-512's 16-lane tiles, or the portable path: the same scalar operations in the same order). That is also the float
// kernel's order, so the result is bit for bit the float GEMM on the dequantized weights (tested).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "lookahead/backend/cpu/gemm.h"

namespace la {

// A quantized matrix as a GGUF file holds it: `rows.size()` rows of `cols` elements of ggml type `type`, each row a
// pointer to its blocks (rows of a fused matrix may come from several tensors, in any order).
struct QuantRows {
  uint32_t type = 0;
  int cols = 0;
  std::vector<const uint8_t*> rows;
};

// Whether the quantized GEMM serves ggml type `type` (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K).
bool quant_gemm_supports(uint32_t type);
// The panel copy (PackedWeight::quantized set); the source may be released afterwards. `read_some`, when given, is
// called after every 1024 panels packed (and at the end): the rows read so far may be released (e.g. a mapped
// file's pages dropped from the resident set, so that packing never holds the whole source and its copy).
PackedWeight pack_quant_weight(const QuantRows& q, const std::function<void()>& read_some = {});
// Panels p0 .. p1-1 on the calling thread (gemm_panels sends quantized weights here).
void gemm_quant_panels(const float* x, int M, const PackedWeight& w, int p0, int p1, const GemmOut& out);

}  // namespace la
