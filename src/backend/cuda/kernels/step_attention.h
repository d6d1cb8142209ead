// Launcher of the step (tree) attention kernel (step_attention.cu, step_attention.cuh); conventions in
// kernel_types.h.
#pragma once
#include "kernel_types.h"
#include "step_attention_plan.h"  // split_keys: kAttnSplitKeys, attn_split_keys

namespace la::kern {

// Step (tree) attention.
//
// out[t, h, :] = softmax(scale * q[t, h, :] . K^T + mask) V over the keys [cache rows 0..cache_len) ++ [step
// rows 0..T) (step row j visible iff j is an ancestor-or-self of t). GQA: query head h uses KV head h / (Hq/Hkv).
// All head rows must have unit stride over D; the other strides are free (a fused [L, 2, Hkv, D] cache works)
// but every row start must be 16-byte aligned (strides multiple of 8 elements for 16-bit, 4 for fp32). D is any
// multiple of 8 (fp16/bf16) or 4 (fp32) up to 128; it is padded to the next of 16/64/80/128 inside the kernel.
//
// Design: one CTA (4 warps) owns a tile of BM query rows (rows = (token, head-in-group) pairs, so all heads of a
// GQA group share each K/V tile; BM = 16 when T*G <= 16, else 64 where the shared memory allows) of one KV head
// and a contiguous range of 32-key tiles (64 on the WMMA path). K and V tiles are copied with cp.async (K of tile
// i+1 streams in during the softmax and PV of tile i, V of tile i during QK^T and softmax). Scores, probabilities
// and the output accumulator live in shared memory; online softmax (running max / sum per row, exp2 domain).
// Two arithmetic paths for QK^T and PV:
//  * scalar (every dtype; the default): fp32 FMAs, 16-bit inputs widened exactly to fp32, one thread per score /
//    output element summing over the head dim / the keys in a fixed order, fp32 probabilities, and a row's step
//    keys read by absolute position (its k-th ancestor at key position cache_len + k). Batch-invariant for every
//    tree node: a token's output is the same bits alone (plain decoding of its path) and inside any tree step, at
//    any T, cache length and row tile. Because that arithmetic is scalar fp32 operations in an order the source
//    fixes (nvcc compiles a row's expressions alike in every row tile), the SIMT emulation's check of it
//    (tests/simt/test_simt_invariance.cpp) carries over to the GPU, unlike anything computed by WMMA.
//  * WMMA (fp16/bf16 with fast_mma): tensor cores (m16n16k16, fp32 accumulators, 16-bit probabilities), step keys
//    at their step index. Invariant only for a chain, and the in-mma accumulation order is the hardware's.
// Cost of the scalar 16-bit default, NOT measured (no GPU here): attention runs on CUDA cores instead of tensor
// cores; for decode-sized steps the kernel is bound by reading the KV cache, which both paths read once, so the
// difference should matter mainly for large steps over long contexts. Measure before choosing fast_mma.
// Flash-decoding split: the key range is cut into parts of split_keys key positions (grid.z), at fixed absolute
// positions so that a row's keys are grouped the same way at any T and cache length (batch invariance); each part
// writes its normalised partial output and log-sum-exp to the fp32 workspace and a combine kernel merges them in
// split order. With one split the kernel writes `out` directly and needs no workspace.
struct StepAttentionArgs {
  DType dtype = DType::F16;
  int T = 0, Hq = 0, Hkv = 0, D = 0;
  const void* q = nullptr;  // [T, Hq, D]
  int64_t q_stride_t = 0, q_stride_h = 0;
  const void* k_cache = nullptr;  // [>= cache_len, Hkv, D]
  int64_t kc_stride_t = 0, kc_stride_h = 0;
  const void* v_cache = nullptr;
  int64_t vc_stride_t = 0, vc_stride_h = 0;
  int cache_len = 0;
  // If set, the kernel reads the cache length from this device int instead (so a captured graph can be replayed
  // at growing lengths). Then max_cache_len must bound it (the kernel clamps to it): the split count is chosen
  // from it at launch time, and the cache must hold that many rows.
  const int32_t* cache_len_dev = nullptr;
  int max_cache_len = 0;
  const void* k_new = nullptr;  // [T, Hkv, D]
  int64_t kn_stride_t = 0, kn_stride_h = 0;
  const void* v_new = nullptr;
  int64_t vn_stride_t = 0, vn_stride_h = 0;
  const uint32_t* anc_bits = nullptr;  // [T, ancestor_words(T)]
  void* out = nullptr;                 // [T, Hq, D], same dtype as q
  int64_t o_stride_t = 0, o_stride_h = 0;
  float scale = 1.f;
  void* workspace = nullptr;  // fp32 partials, at least step_attention_workspace_bytes(T, Hq, D, splits)
  size_t workspace_bytes = 0;
  // Key positions per flash-decoding split, a positive multiple of 64; 0: kAttnSplitKeys (512). Splits sit at
  // fixed absolute key positions (batch invariance, step_attention_plan.h): keep it constant for a model (e.g.
  // attn_split_keys(capacity)); the launch fails if the workspace cannot hold step_attention_splits(...) splits.
  int split_keys = 0;
  // Slot mode: a batched step whose tokens belong to `slots` caches (requests), each token reading only its own
  // slot's cache. slot_seg (device, slots x 4 int32): {first token, tokens, cache length, cache rows} of each slot,
  // its tokens contiguous in the step (slots with 0 tokens are allowed: padding); slot_caches (device, 2 x slots
  // pointers): every slot's K cache base, then every slot's V cache base (strides kc_/vc_stride_* for all). The
  // step's ancestor bits span the whole step (a token's ancestors are rows of its own slot). Then k_cache,
  // v_cache, cache_len and cache_len_dev are unused and max_cache_len must bound every slot's cache rows (the split
  // plan). Scalar path only (fast_mma is refused). Batch invariance as above: a row tile never mixes slots, the
  // splits stay at absolute key positions of the row's own cache, and a token's arithmetic depends on its own
  // slot's keys and its ancestors only, so its output is the same bits as in a single-slot step of its request.
  const int32_t* slot_seg = nullptr;
  void* const* slot_caches = nullptr;
  int slots = 0;
  // fp16/bf16: tensor cores (WMMA) instead of the default scalar path, which is batch-invariant for every tree
  // node (see above). Ignored for fp32 (scalar only).
  bool fast_mma = false;
};


// Workspace for `splits` splits (16-byte multiple).
size_t step_attention_workspace_bytes(int T, int Hq, int D, int splits = 64);
// The split count launch_step_attention will use for these arguments (1 means no workspace needed).
int step_attention_splits(const StepAttentionArgs& a);
cudaError_t launch_step_attention(const StepAttentionArgs& a, cudaStream_t stream);

}  // namespace la::kern
