// The CUDA step forward with the lookahead kernels and CUDA graphs (private to the CUDA backend and the engine;
// includes ATen, so only the forward's translation units include it). TorchLlama (src/engine/torch_llama.cpp) owns
// the weights and the KV cache, hands this backend references to them (CudaModelRefs, no engine types) and
// calls this for CUDA steps of at most kMaxRows tokens when --kernels is on; its ATen forward remains the CPU
// path, the reference (--kernels off) and the path for larger steps (long prefills), on the same cache layout.
// The launches of a step are the ATen-free step program (cuda_step.h), which runs on the CPU under the SIMT
// emulation in CI; what this class adds (tensors, uploads, graphs, the cuBLAS GEMMs) does not, and a wrong cuBLAS
// argument or graph shows first as a start-up self-check mismatch on a GPU (docs/gpu.md section 1).
#pragma once
#include <ATen/ATen.h>

#ifdef LOOKAHEAD_WITH_CUDA
#include "cuda_step.h"  // the step program on raw pointers (needs kernels/, on the include path of CUDA builds only)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lookahead/model/config.h"
#include "lookahead/backend/cuda/step_layout.h"
#include "lookahead/model/step_model.h"

namespace la {

// One decoder layer's weights as the CUDA forward reads them (the engine's fused tensors: q/k/v and gate/up).
struct CudaLayerRefs {
  at::Tensor ln1, wqkv, bqkv, wo, bo, ln2, wgu, wd;
};

// What the CUDA forward reads from the model (tensors on one CUDA device; the cache vectors are the model's own
// and may be reallocated: call cache_changed() then).
struct CudaModelRefs {
  const ModelConfig* cfg = nullptr;
  at::ScalarType dtype = at::kFloat;
  at::Tensor embed, norm, lm_head, inv_freq;  // inv_freq: float32 [D/2]
  std::vector<CudaLayerRefs> layers;
  const std::vector<at::Tensor>* kc = nullptr;  // per layer [cap, Hkv, D]
  const std::vector<at::Tensor>* vc = nullptr;
};

class CudaForward {
 public:
  static constexpr int kMaxRows = 256;  // the largest graph bucket
  // Why the kernels cannot serve this model ("" when they can): head dim, alignment of the fused qkv rows.
  static std::string unsupported_reason(const ModelConfig& cfg, at::ScalarType dt);

  // fixed_gemm: the projections by kern::launch_linear_fixed (batch-invariant), else by cuBLAS.
  CudaForward(const CudaModelRefs& refs, bool graphs, bool fixed_gemm = true);
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;

  // Runs a step of T <= kMaxRows tokens on the committed cache of length L (rows L .. L+bucket(T) of every
  // layer's cache are written: the caller guarantees capacity). Only rows first_output .. T-1 get the LM head
  // (step_layout.h): afterwards logits(n) holds their [n, V] logits (model dtype, device), n = T - first_output,
  // and argmax_to_host(n) their argmax.
  void run(const StepInput& in, int L, int cache_rows, int first_output);
  at::Tensor logits(int n) const { return logits_.narrow(0, 0, n); }
  // One device-to-host copy of n int32 into pinned memory, then a stream synchronisation. The pointer is valid
  // until the next step (no allocation per step).
  const int32_t* argmax_to_host(int n);
  // Commit in place: rows L + idx[j] -> L + j of every layer's K and V, one kernel launch (idx not the identity).
  void commit(const std::vector<int32_t>& idx, int L);
  // The cache was reallocated: captured graphs and the cache pointer table are stale.
  void cache_changed();

  // A batched step (TorchLlama::forward_batch): slot i's tokens on the cache of a model sharing these weights (this
  // one's or a fork's: caches_of), all rows in one pass on this forward's buffers (enqueue_batch_step), one graph
  // per row bucket (apart from the single-slot ones; the slots' cache pointers, lengths and capacities travel in
  // the step upload, so a fork's reallocated cache stales no graph). Only each slot's output rows (first_output ..
  // T_i - 1) get the LM head: slot i's are rows o_i .. o_i + T_i - first_output_i of logits_at()/argmax_to_host(),
  // o_i the output rows of the slots before it; each is the same bits as in that slot's own run(). Nothing is
  // allocated: at most kMaxBatchSlots slots of kMaxRows rows in all, each slot's length + T_i within its cache
  // and within max_batch_cache_rows().
  struct Slot {
    const StepInput* in = nullptr;
    const StepCaches* caches = nullptr;
    int len = 0;
    int first_output = 0;
  };
  void run_batch(const Slot* slots, int n);
  int max_batch_cache_rows() const { return max_batch_cache_rows_; }
  const StepCaches& caches() const { return sc_; }
  at::Tensor logits_at(int first, int T) const { return logits_.narrow(0, first, T); }

  struct Counters {
    uint64_t steps = 0, eager = 0, captures = 0, replays = 0;
  };
  const Counters& counters() const { return counters_; }

 private:
  void enqueue(int rows, const PaddedStepLayout& lay);  // the whole step on the current stream (enqueue_step)
  void enqueue_batch(const BatchStepLayout& lay);        // the same for a batched step (enqueue_batch_step)
  // Eager warm-up, then capture, then replays of the step shape's graph in `graphs` (keyed by graph_key: bucket
  // rows, LM head rows, gather).
  static int graph_key(const PaddedStepLayout& lay) { return (lay.rows * 1024 + lay.lm_rows) * 2 + lay.gather; }
  template <class F>
  void launch(std::map<int, std::unique_ptr<at::cuda::CUDAGraph>>& graphs, std::map<int, int>& seen, int key,
              F&& enqueue_fn);
  void rebuild_cache_table();

  CudaModelRefs m_;
  bool graphs_;
  at::Device dev_;
  int H_, Hq_, Hkv_, D_, Q_, KV_, W_, I_, V_, layers_;
  int split_keys_ = 0;  // attention key positions per split, fixed for the model (batch invariance)
  at::Tensor x_, h_, a_, qkv_, attn_, gu_, act_, logits_, am_, dstep_, ws_, table_, dcommit_;
  at::Tensor hstep_, hout_, hcommit_;  // pinned host buffers
  std::map<int, std::unique_ptr<at::cuda::CUDAGraph>> graphs_by_rows_;
  std::map<int, int> seen_;
  std::map<int, std::unique_ptr<at::cuda::CUDAGraph>> batch_graphs_;  // batched steps, by graph_key
  std::map<int, int> batch_seen_;
  at::Tensor dbstep_, hbstep_;            // the batched step's upload (batch_step_layout(kMaxRows)), device/pinned
  std::vector<BatchSlotStep> bslots_;     // reserved for kMaxBatchSlots: no allocation per step
  int max_batch_cache_rows_ = 0;          // the attention's split plan bound of a batched step (fixed per model)
  std::optional<c10::cuda::CUDAStream> capture_stream_;  // every capture runs on it
  bool have_pool_ = false;
  c10::MempoolId_t pool_{0, 0};
  Counters counters_;
  // The step program's view of the tensors above (filled once; the caches again in cache_changed) and its GEMMs
  // (cuBLAS, torch_cuda_forward.cpp).
  StepDims sd_;
  StepWeights sw_;
  StepBuffers sb_;
  StepCaches sc_;
  std::unique_ptr<StepLinear> lin_;
};

}  // namespace la
#endif  // LOOKAHEAD_WITH_CUDA
