// The step program of the CUDA forward, device-agnostic: every launch of one padded step (embedding gather,
// fused add+RMSNorm, the q/k/v, output, gate/up, down and lm_head projections, RoPE on the fused qkv, KV append at
// the device-side cache length, step attention under packed ancestor bits, SwiGLU, row argmax) on raw pointers.
// No ATen or c10 here, so the same file runs on a GPU (CudaForward, torch_cuda_forward.cpp, fills these structs
// from its tensors) and on the CPU under the SIMT emulation (tests/simt/test_simt_forward.cpp, against the ATen
// forward). The projections go through StepLinear: cuBLAS in production, a plain host loop under the emulation
// (the emulation cannot run cuBLAS; a wrong cuBLAS argument is caught by the start-up self-check on the first GPU
// run, docs/gpu.md section 1).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernel_types.h"  // cuda_runtime_api.h: the toolkit's, or the SIMT stand-in
#include "linear.h"
#include "lookahead/backend/cuda/step_layout.h"

namespace la {

// y = x w^T (+ bias) as kern::LinearArgs describes, enqueued on `stream` (no synchronisation, no allocation).
struct StepLinear {
  virtual ~StepLinear() = default;
  virtual cudaError_t linear(const kern::LinearArgs& a, cudaStream_t stream) = 0;
};

struct StepDims {
  kern::DType dt = kern::DType::F32;
  int H = 0, Hq = 0, Hkv = 0, D = 0, I = 0, V = 0, layers = 0;
  float eps = 1e-5f;
  int split_keys = 0;  // attention key positions per split (kern::attn_split_keys): fixed per model
  int Q() const { return Hq * D; }
  int KV() const { return Hkv * D; }
  int W() const { return Q() + 2 * KV(); }  // fused qkv row: q | k | v
};

// Device pointers (element type dims.dt unless said otherwise). Biases may be null.
struct StepLayerWeights {
  const void* ln1 = nullptr;   // [H]
  const void* wqkv = nullptr;  // [W, H]
  const void* bqkv = nullptr;  // [W]
  const void* wo = nullptr;    // [H, Q]
  const void* bo = nullptr;    // [H]
  const void* ln2 = nullptr;   // [H]
  const void* wgu = nullptr;   // [2I, H]: gate rows then up rows
  const void* wd = nullptr;    // [H, I]
};
struct StepWeights {
  const void* embed = nullptr;      // [V, H]
  const void* norm = nullptr;       // [H]
  const void* lm_head = nullptr;    // [V, H] (may alias embed)
  const float* inv_freq = nullptr;  // fp32 [D/2]
  std::vector<StepLayerWeights> layers;
};

// Static buffers for up to `rows` step rows, each contiguous with the row widths given.
struct StepBuffers {
  int rows = 0;
  void *x = nullptr, *h = nullptr, *a = nullptr;  // [rows, H]: residual stream, normed, projection out
  void* qkv = nullptr;                              // [rows, W]
  void* attn = nullptr;                             // [rows, Q]
  void* gu = nullptr;                               // [rows, 2I]
  void* act = nullptr;                              // [rows, I]
  void* logits = nullptr;                           // [rows, V]: output rows only (PaddedStepLayout::lm_rows)
  int32_t* argmax = nullptr;                        // [rows]
  const int32_t* step = nullptr;  // the uploaded padded step (PaddedStepLayout words: ids, positions, len, bits)
  void* workspace = nullptr;      // attention partials
  size_t workspace_bytes = 0;
};

// Per layer K and V caches [cache_rows, Hkv, D].
struct StepCaches {
  std::vector<void*> k, v;
  int rows = 0;
};

// What failed: the launch's name and its error (err == cudaSuccess: all enqueued).
struct StepStatus {
  cudaError_t err = cudaSuccess;
  const char* what = "";
  bool ok() const { return err == cudaSuccess; }
};

// Enqueues the whole step of lay.rows (padded) rows on `stream`: logits and argmax of the step's output rows
// (lay.lm_rows of them, in the order of the step buffer's output list: PaddedStepLayout) land in buf.logits /
// buf.argmax, and K/V of the step rows at cache rows len .. len + rows of every layer, len being the step buffer's
// cache_len word (read on the device: one captured graph serves every cache length). Stops at the first failed
// launch.
StepStatus enqueue_step(const StepDims& d, const StepWeights& w, const StepBuffers& buf, const StepCaches& c,
                        const PaddedStepLayout& lay, StepLinear& lin, cudaStream_t stream);

// A batched step: the requests (slots) of lay (batch_step_layout, uploaded to buf.step with fill_batch_step) in
// ONE pass: every GEMM and row kernel over all lay.step.rows rows at once, the KV append and the attention per row
// from its slot's cache pointers, length and capacity read on the device (kern::launch_kv_append_slots, the
// attention's slot mode), so one captured graph per step shape (bucket, LM head rows) serves every batch.
// max_cache_rows bounds every slot's cache rows (the attention's split plan: keep it constant for the model).
// Each row's logits and argmax are the same bits as in a single-slot step of its request (every kernel and the GEMM batch-invariant: the attention's
// row tiles never mix slots and its splits sit at absolute key positions; the other kernels compute a row from that
// row alone; the LM head's GEMM is batch-invariant too, so gathering the output rows changes no bits). Commit per
// slot afterwards (kern::launch_kv_commit with the slot's cache table).
StepStatus enqueue_batch_step(const StepDims& d, const StepWeights& w, const StepBuffers& buf,
                              const BatchStepLayout& lay, int max_cache_rows, StepLinear& lin, cudaStream_t stream);

}  // namespace la
