// Host launchers of the lookahead CUDA kernels. Plain C++ (no libtorch): raw device pointers, sizes, strides in
// elements, and a stream. Every launcher only enqueues work (no synchronisation, no allocation, no host<->device
// copy), so all of them can be captured into a CUDA graph, and returns cudaSuccess or the launch error
// (cudaErrorInvalidValue for bad arguments). Element types: fp32, fp16, bf16; arithmetic is fp32.
//
// Conventions shared by the kernels:
//  * A step has T new tokens. parents[i] < i is token i's parent among the step tokens, or -1 (root: it sees the
//    committed cache only). Token i attends to the whole committed cache plus its ancestors, itself included.
//    A parent that is not in [-1, i) ends the ancestor walk (treated as -1).
//  * The mask among step tokens is packed ancestor bits: bits[i * words + (j >> 5)] has bit (j & 31) set iff j is
//    i or an ancestor of i, words = ancestor_words(T). launch_ancestor_bits computes them from parents on the
//    device (one thread per token walks its parent chain); compute them once per step and reuse for every layer.
//  * Padding a step to a fixed size (CUDA graph buckets): padding tokens go after the real ones with parent -1
//    (and verify flag 0). Real tokens never have them as ancestors, so real outputs do not change; the padding
//    rows' outputs are garbage-free but meaningless and must be ignored (and never committed to the cache).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "lookahead/model/step_layout.h"

namespace la::kern {

enum class DType : int { F32 = 0, F16 = 1, BF16 = 2 };
size_t dtype_size(DType t);
const char* dtype_name(DType t);

// ---------------------------------------------------------------------------------------------------------------
// Step (tree) attention.
//
// out[t, h, :] = softmax(scale * q[t, h, :] . K^T + mask) V over the keys [cache rows 0..cache_len) ++ [step
// rows 0..T) (step row j visible iff j is an ancestor-or-self of t). GQA: query head h uses KV head h / (Hq/Hkv).
// All head rows must have unit stride over D; the other strides are free (a fused [L, 2, Hkv, D] cache works)
// but every row start must be 16-byte aligned (strides multiple of 8 elements for 16-bit, 4 for fp32). D is any
// multiple of 8 (fp16/bf16) or 4 (fp32) up to 128; it is padded to the next of 16/64/80/128 inside the kernel.
//
// Design: one CTA (4 warps) owns a tile of BM query rows (rows = (token, head-in-group) pairs, so all heads of a
// GQA group share each K/V tile; BM = 16 when T*G <= 16, else 64) of one KV head and a contiguous range of
// 64-key tiles (32 for fp32). K and V tiles are copied with cp.async (K of tile i+1 streams in during the
// softmax and PV of tile i, V of tile i during QK^T and softmax). QK^T and PV use tensor cores (WMMA
// m16n16k16, fp32 accumulators) for fp16/bf16 and plain fp32 FMAs for fp32 input. Scores, probabilities and the
// output accumulator live in shared memory; online softmax (running max / sum per row, exp2 domain).
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
};

inline int ancestor_words(int T) { return (T + 31) / 32; }
cudaError_t launch_ancestor_bits(const int32_t* parents, int T, uint32_t* bits, cudaStream_t stream);

// Workspace for `splits` splits (16-byte multiple).
size_t step_attention_workspace_bytes(int T, int Hq, int D, int splits = 64);
// The split count launch_step_attention will use for these arguments (1 means no workspace needed).
int step_attention_splits(const StepAttentionArgs& a);
cudaError_t launch_step_attention(const StepAttentionArgs& a, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------------------
// Fused element-wise ops. Rows have unit stride over their last dim; row strides are free. A 16-byte vector path
// is used when sizes, pointers and strides allow it, a scalar path otherwise.

// RMSNorm (HF Llama semantics): h = x (+ residual, rounded to dtype); out = w * dtype(h * rsqrt(mean(h^2) + eps)).
// residual may be null. If residual_out is non-null it receives h (it may alias x or residual: in-place update of
// the residual stream). out may alias x. weight has H elements of the same dtype.
cudaError_t launch_rms_norm(DType dt, int rows, int H, const void* x, int64_t x_stride, const void* residual,
                            int64_t residual_stride, void* residual_out, int64_t residual_out_stride,
                            const void* weight, float eps, void* out, int64_t out_stride, cudaStream_t stream);

// RoPE, rotate-half (HF) layout, in place on q [T, Hq, D] and optionally k [T, Hk, D] (k may be null).
// angle[t, i] = positions[t] * inv_freq[i] (fp32), i < D/2; cos/sin are multiplied by attn_scale and, for 16-bit
// dtypes, rounded to the dtype as HF does; then x[i] <- x[i] cos - x[i+D/2] sin, x[i+D/2] <- x[i+D/2] cos + x[i]
// sin, each product and the sum rounded to the dtype like HF's `x * cos + rotate_half(x) * sin`. inv_freq is
// precomputed by the caller (Llama-3 / linear scaling included). Row starts need no alignment.
cudaError_t launch_rope(DType dt, int T, int D, const int32_t* positions, const float* inv_freq, float attn_scale,
                        void* q, int Hq, int64_t q_stride_t, int64_t q_stride_h, void* k, int Hk,
                        int64_t k_stride_t, int64_t k_stride_h, cudaStream_t stream);

// SwiGLU: out[t, i] = dtype(silu(gate[t, i])) * up[t, i] (silu in fp32 and rounded, as torch's F.silu on 16-bit).
// Two inputs, or one fused [T, 2I] buffer with gate = columns [0, I) and up = columns [I, 2I): pass gate = x,
// up = x + I (elements) and both strides 2I.
cudaError_t launch_swiglu(DType dt, int T, int I, const void* gate, int64_t gate_stride, const void* up,
                          int64_t up_stride, void* out, int64_t out_stride, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------------------
// KV cache (kv_cache.cu). Caches are [rows, Hkv, D] with unit stride over D.

// k_cache[len + t, h, :] = k_new[t, h, :] and the same for v, for t < T, with len = *cache_len_dev read on the
// device (one captured graph serves every cache length). Rows at or past cache_rows are skipped.
cudaError_t launch_kv_append(DType dt, int T, int Hkv, int D, const void* k_new, int64_t kn_stride_t,
                             int64_t kn_stride_h, const void* v_new, int64_t vn_stride_t, int64_t vn_stride_h,
                             void* k_cache, void* v_cache, int64_t c_stride_t, int64_t c_stride_h,
                             const int32_t* cache_len_dev, int cache_rows, cudaStream_t stream);

// Commit of an accepted path: in each of `caches` contiguous caches (device array of base pointers, e.g. every
// layer's K and V), row len + j <- row len + src[j] for j < m, in order. src (device, m ints) must be strictly
// increasing with src[j] >= j (a root-to-node path of the last step) and len + src[m-1] inside the cache.
cudaError_t launch_kv_commit(DType dt, int caches, void* const* cache_ptrs_dev, int64_t row_elems, int len,
                             const int32_t* src_dev, int m, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------------------
// Greedy verification.

// out[r] = argmax_v logits[r, v] (first index on ties, NaN counts as the maximum, like torch.argmax).
cudaError_t launch_argmax_rows(DType dt, int rows, int V, const void* logits, int64_t row_stride, int32_t* out,
                               cudaStream_t stream);

// Longest accepted path. From node 0, repeatedly move to the first child c (lowest index) of the current node
// with verify[c] != 0 (verify may be null: all) and tokens[c] == argmax[current]; stop when there is none.
// out (capacity 1 + 2T int32, compact): out[0] = P (path length, >= 1, node 0 included), out[1 .. 1+P) = path
// node indices, out[1+P .. 1+2P) = new tokens: the P-1 accepted children's tokens, then argmax of the last node.
// So the host copies 1 + 2*(max depth + 1) ints (or all 1 + 2T).
cudaError_t launch_greedy_accept(int T, const int32_t* parents, const int32_t* tokens, const uint8_t* verify,
                                 const int32_t* argmax, int32_t* out, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------------------
// CUDA graphs per padded step size. A model captures one step per bucket (the smallest bucket >= T) and replays
// it for any step with that bucket, the inputs padded as described at the top (parents -1, verify 0, any valid
// position; outputs of padding rows ignored). Everything a captured step reads must live at fixed addresses
// (static input/output buffers, KV cache, workspace) and every value that varies between replays must be read
// from device memory (e.g. StepAttentionArgs::cache_len_dev with max_cache_len = cache capacity). Allocations
// inside the capture must come from memory that outlives the graph: with libtorch, route the caching allocator
// to a private pool around the capture (c10::cuda::CUDACachingAllocator::beginAllocateToPool / endAllocateToPool)
// or pre-allocate. Capture requires a non-default stream.
// The body must launch everything on the `stream` it is given: ATen ops and the la::cuda adapters launch on c10's
// current stream instead, so a body using them is not captured here. The model's forward therefore does not use
// this class: it captures with at::cuda::CUDAGraph on a side stream made c10's current stream
// (src/model/torch_cuda_forward.cpp); StepGraphs serves raw-launcher code (tests/kernels/test_graph.cpp).
class StepGraphs {
 public:
  explicit StepGraphs(std::vector<int> buckets = la::step_buckets());  // the CUDA forward's buckets
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  const std::vector<int>& buckets() const { return buckets_; }
  // Smallest bucket >= T, or -1 if T exceeds the largest one.
  int bucket_for(int T) const;
  bool captured(int bucket) const;
  // Captures body(stream) (cudaStreamCaptureModeThreadLocal by default) and instantiates it, replacing an earlier
  // graph for this bucket. On failure nothing is cached and the error is returned (a capture that body left
  // broken is ended and discarded).
  cudaError_t capture(int bucket, cudaStream_t stream, const std::function<void(cudaStream_t)>& body,
                      cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal);
  // Launches the cached graph; cudaErrorInvalidValue if the bucket was never captured.
  cudaError_t replay(int bucket, cudaStream_t stream) const;
  void clear();

 private:
  int index_of(int bucket) const;
  std::vector<int> buckets_;
  std::vector<cudaGraphExec_t> execs_;
};

}  // namespace la::kern
