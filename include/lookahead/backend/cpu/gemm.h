// y = x W^T (+ bias) (+ y) for a step's token rows x [M, K] (fp32) and a weight W [N, K] in fp32, bf16 or fp16,
// accumulated in fp32; M is any number of rows (1 for plain decoding, up to a few hundred for a prefill).
//
// Layout. The weight is repacked once, at load (pack_weight), into panels of 8 consecutive weight rows stored
// k-major, so that one 8-lane load is the k-th weight of 8 output rows:
//
//   panel p (rows 8p .. 8p+7):  | w[8p][0] .. w[8p+7][0] | w[8p][1] .. w[8p+7][1] | ... | w[8p][K-1] .. |
//                                 <------ 8 lanes ------>                                  (last panel zero-padded)
//
// A register tile is P panels x C token rows of 8-lane accumulators (P x C <= 12, chosen by M): per k it loads P
// weight vectors and broadcasts C activations, so each weight byte is streamed from memory once per call, there
// is no horizontal reduction (a whole SmolLM2 pass of GEMMs at M = 32 ran at 79 GFLOP/s per core on the 2-core
// EPYC). Threads split the panels. A strip's tiles prefetch the next strip while they compute, so the weights'
// reads overlap the arithmetic (gemm.cpp, gemm_panels). bf16/fp16 weights are widened in registers as they are
// loaded, in every tile:
// widening a block to fp32 once for several tiles measured slower (bf16 M = 8: 24.7 vs 15.1 ms per SmolLM2 pass),
// since the re-reads from L2 then carry twice the bytes.

// On a CPU with AVX-512F, fp32 products of 4 rows and more take 16-lane tiles: two panels side by side in one
// register, 8 token rows a tile (gemm.cpp). The layout stays the same for every path.
//
// Batch invariance: every output y[t][n] is computed by one thread alone as
//   s = 0;  s = fma(w[n][k], x[t][k], s)   for k = 0, 1, ..., K-1, in order
//   y[t][n] = (s + bias[n]) (+ y[t][n] with accumulate)
// in one lane of one accumulator, whatever M is, whichever tile shape or lane the element falls in, whatever the
// thread count or the ISA path (8 or 16 lanes a register) (the portable path does the same scalar fma chain). A token's result therefore
// does not depend on the rest of the step: the same bits alone, in any tree, on any rank.
#pragma once
#include <cstddef>
#include <memory>

#include "lookahead/model/dtype.h"

namespace la {

class ThreadPool;

// A weight as loaded: row-major [rows, cols].
struct WeightView {
  const void* data = nullptr;
  WType type = WType::F32;
  int rows = 0, cols = 0;  // N, K
};

// A weight in the GEMM's panel layout (above). Copies share the storage.
struct PackedWeight {
  const void* data = nullptr;  // ceil(rows / 8) panels of [cols][8] elements of `type`
  WType type = WType::F32;
  int rows = 0, cols = 0;
  std::shared_ptr<const void> storage;
  size_t bytes = 0;  // of the panels (storage)
  // Quantized panels (include/lookahead/backend/cpu/gemm_quant.h: pack_quant_weight) of ggml type qtype; gemm() serves them
  // with the same per-output order. `type` is then unused.
  bool quantized = false;
  uint32_t qtype = 0;
  int panels() const { return (rows + 7) / 8; }
};

// The panel copy of a row-major weight (exact: the same values, zero rows padding the last panel).
PackedWeight pack_weight(const WeightView& w);

struct GemmOut {
  float* y = nullptr;
  int ldy = 0;
  const float* bias = nullptr;  // [N] or null
  bool accumulate = false;      // y += result (the residual add), else y = result
};

// The whole output, panels split over the pool (small products stay on the calling thread).
void gemm(ThreadPool& pool, const float* x, int M, const PackedWeight& w, const GemmOut& out);
// Panels p0 .. p1-1 (output rows 8 p0 .. min(8 p1, N) - 1) on the calling thread.
void gemm_panels(const float* x, int M, const PackedWeight& w, int p0, int p1, const GemmOut& out);

// Element (n, k) of a float-panel weight, widened to fp32 as the GEMM reads it.
float packed_at(const PackedWeight& w, int n, int k);
// One output y[n] of one token row x (K) without bias, exactly as gemm() computes it (the fma chain above): the
// same bits as that element of a whole product (the greedy head's sketch computes its candidates with it).
float gemm_output(const float* x, const PackedWeight& w, int n);

// An 8-lane dot product of two fp32 vectors: lanes l = k mod 8 accumulate fma in k order, then the fold
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then the K % 8 tail by fma in order (RMSNorm uses it).
float dot_f32(const float* a, const float* b, int K);

}  // namespace la
