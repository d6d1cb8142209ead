// Step (tree) attention on the CPU: each step token attends to the committed cache and to its ancestors in the
// step (itself included), grouped-query (g = heads / kv_heads query heads share a K/V head), K/V read from the
// cache in the model's dtype (the step's own K/V are written there first).
//
//   keys of token t:  cache rows 0 .. L-1 | step rows of t's ancestors, root first, then t itself
//
// Batch invariance: a token's keys are visited in that order, which is the order of their positions, the order a
// plain decode of the same path visits them (its cache then holds exactly those rows). For each query head:
// scores s_j = dot(q, k_j) * scale with the GEMM's 8-lane order (gemm.h); m = max_j s_j; p_j = exp(s_j - m);
// sum = p_0 + p_1 + ... in key order; out[d] = (fma over j in key order of p_j * v_j[d]) / sum. Nothing is split
// into chunks, so no boundary can depend on the step size, the tree or the cache length; one thread computes a
// (token, K/V head) pair alone, so the thread count does not matter either.
// On the AVX2 path the g query heads of a K/V head are computed together, in groups of up to 3 (each K and V
// vector loaded once for the group), every score and output element by the same chain as above: grouping moves no
// bit (attention.cpp).
//
// Gemma-2's attention soft-capping (softcap > 0) maps each score s_j to softcap * tanh(s_j / softcap) right after
// the scaling (transformers' order), before the max. A sliding window (window > 0) drops the keys at positions
// <= pos_t - window: cache row r holds position r, a step token's ancestors have their own positions, so t keeps
// cache rows max(0, pos_t - window + 1) .. L-1 and those ancestors whose position is > pos_t - window. The window
// is thus counted along t's own path, and the kept keys are exactly (in the same order) those plain decoding of
// that path keeps, whatever the tree's other branches: the invariance above holds unchanged.
#pragma once
#include <cstdint>
#include <vector>

#include "lookahead/model/dtype.h"

namespace la {

class ThreadPool;

struct AttentionShape {
  int heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1.f;
  float softcap = 0.f;  // > 0: scores soft-capped (Gemma-2)
  int window = 0;       // > 0: keys at positions <= pos - window are hidden (needs positions)
};

struct KvLayer {
  const void* k = nullptr;  // [capacity, kv_heads, head_dim] of `type`
  const void* v = nullptr;
  WType type = WType::F32;
};

// Per-thread score rows, grown by reserve().
struct AttentionScratch {
  std::vector<std::vector<float>> per_thread;
  void reserve(int threads, int group, int max_keys);
};

// One sequence's part of a batched step (several requests in one forward): its layer cache, its L committed rows,
// its T step rows at rows row0 .. row0+T-1 of q and out, its parents (relative to the segment, < t or -1) and
// positions. Each row attends to its own segment's cache and ancestors only, with the keys and order above: a
// row's output is the same bits whatever the other segments are (batch invariance across requests).
struct AttentionSegment {
  KvLayer kv;
  int L = 0;
  int row0 = 0;
  int T = 0;
  const int32_t* parents = nullptr;
  const int32_t* positions = nullptr;  // read only with a window
};

// out[t][h * D + d] for the T step tokens: q [T, heads * D] (ldq floats per row), parents as in StepInput, the
// step's rows at cache rows L .. L+T-1; positions [T] of the step tokens (read only with a window).
void step_attention(ThreadPool& pool, AttentionScratch& scratch, const AttentionShape& s, const float* q, int ldq,
                    const KvLayer& kv, int L, const int32_t* parents, int T, float* out, int ldo,
                    const int32_t* positions = nullptr);
// The same over several segments in one parallel region (scratch reserved for the largest L + T).
void step_attention(ThreadPool& pool, AttentionScratch& scratch, const AttentionShape& s, const float* q, int ldq,
                    const AttentionSegment* segs, int nseg, float* out, int ldo);

}  // namespace la
