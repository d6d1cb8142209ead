// y = x W^T (+ bias) (+ y) for a step's token rows x [M, K] (fp32) and a weight W [N, K] in fp32, bf16 or fp16,
// accumulated in fp32; M is any number of rows (1 for plain decoding, up to a few hundred for a prefill).
//
// Each weight byte is streamed from memory once per call: a block of 4 weight rows is read once (converted to
// fp32 in a per-thread scratch when several token tiles will reuse it) and multiplied with every token row while
// it sits in L1, 3 token rows at a time. Threads split the weight rows.
//
// Batch invariance: every output y[t][n] is computed by one thread alone as
//   acc[l] = fma(w[n][8j + l], x[t][8j + l], acc[l])   for j = 0, 1, ... (lanes l = 0..7, from zero)
//   s = ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7))
//   s = fma(w[n][k], x[t][k], s)                        for the K % 8 tail, in order
//   y[t][n] = (s + bias[n]) (+ y[t][n] with accumulate)
// whatever M is, wherever row t falls in its tile, whatever the tile shape at the edges, the thread count or the
// ISA path (the portable path emulates the 8 lanes). A token's result therefore does not depend on the rest of the
// step: the same bits alone, in any tree, on any rank.
#pragma once
#include <vector>

#include "lookahead/cpu/dtype.h"

namespace la {

class ThreadPool;

struct WeightView {
  const void* data = nullptr;  // row-major [rows, cols]
  WType type = WType::F32;
  int rows = 0, cols = 0;      // N, K
};

struct GemmOut {
  float* y = nullptr;
  int ldy = 0;
  const float* bias = nullptr;  // [N] or null
  bool accumulate = false;      // y += result (the residual add), else y = result
};

// Per-thread scratch for weight blocks converted to fp32: 4 * K floats per pool thread, grown by reserve().
struct GemmScratch {
  std::vector<std::vector<float>> per_thread;
  void reserve(int threads, int max_k);
};

// Rows n0 .. n1-1 of the output on the calling thread (scratch: at least 4 * K floats, or null for fp32 weights).
void gemm_rows(const float* x, int M, const WeightView& w, int n0, int n1, const GemmOut& out, float* scratch);
// The whole output, weight rows split over the pool (small products stay on the calling thread).
void gemm(ThreadPool& pool, GemmScratch& scratch, const float* x, int M, const WeightView& w, const GemmOut& out);

// The 8-lane dot product above for one pair of fp32 vectors (attention uses it for q . k).
float dot_f32(const float* a, const float* b, int K);

}  // namespace la
