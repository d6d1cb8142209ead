// The CPU step forward (no libtorch): a Llama-family step over the committed KV cache with this folder's kernels
// and one thread pool. TorchLlama (src/model/torch_llama.cpp) owns the weights and the cache and hands this
// class the GEMM's panel copies of the matrices (made once per model, shared by its forks) and raw views of the
// rest; the ATen forward stays the reference (--kernels off). Memory: the panel copies are a second copy of the
// matrices next to the ATen tensors, which stay for --kernels off forks and the weights' checksum.
//
// One step of T tokens, activations in fp32, weights and the KV cache in the model's dtype:
//   x = embed[tokens]
//   per layer: h = rmsnorm(x) ; qkv = h Wqkv^T (+b) ; rope(q, k) ; cache[L + i] = k, v (rounded to the dtype)
//              x += attention(q, cache | ancestors) Wo^T (+b) ; h = rmsnorm(x) ; x += swiglu(h Wgu^T) Wd^T
//   logits = rmsnorm(x) Wlm^T   (fp32, [T, V])
// Every kernel keeps a fixed reduction order per output element (see each header), so a token's logits are the
// same bits alone, inside any tree of any size, at any cache length, with any thread count, on any rank.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/cpu/attention.h"
#include "lookahead/cpu/gemm.h"
#include "lookahead/model/config.h"
#include "lookahead/model/step_model.h"

namespace la {

class ThreadPool;

// The weights the kernels read: the GEMM's panel copies (pack_weight, shared by every replica of the model) and
// raw views of the small vectors.
struct CpuLayerView {
  PackedWeight wqkv, wo, wgu, wd;
  const void* ln1 = nullptr;   // [hidden]
  const void* ln2 = nullptr;
  const void* bqkv = nullptr;  // [q + 2 kv] or null
  const void* bo = nullptr;    // [hidden] or null
};

struct CpuModelView {
  WType type = WType::F32;
  const void* embed = nullptr;  // [vocab, hidden]
  const void* norm = nullptr;   // [hidden]
  PackedWeight lm_head;
  std::vector<CpuLayerView> layers;
  const float* rope_cos = nullptr;  // [max_positions, head_dim] fp32
  const float* rope_sin = nullptr;
};

class CpuForward {
 public:
  // Why these kernels cannot serve the model ("" when they can).
  static std::string unsupported_reason(const ModelConfig& cfg);

  CpuForward(const ModelConfig& cfg, const CpuModelView& w, std::shared_ptr<ThreadPool> pool);
  ~CpuForward();

  // The cache: per layer [capacity, kv_heads, head_dim] of the model's type (call again after reallocating).
  void set_cache(const std::vector<void*>& k, const std::vector<void*>& v, int capacity);
  // Runs the step on L committed rows (writes K/V rows L .. L+T-1; the caller guarantees capacity) and returns the
  // [T, vocab] fp32 logits, valid until the next run. Buffers grow to the largest step seen, never shrink.
  const float* run(const StepInput& in, int L);
  // Per-row argmax of the last run's logits (lowest index on ties, as ATen's argmax).
  void argmax(int T, int32_t* out) const;
  // Commit in place: rows L + idx[j] -> L + j of every layer (idx strictly increasing with idx[j] >= j).
  void commit_rows(const std::vector<int32_t>& idx, int L);

  int threads() const;
  std::string describe() const;

 private:
  void grow(int T, int keys);
  void layer(int l, const StepInput& in, int T, int L);

  ModelConfig cfg_;
  CpuModelView w_;
  std::shared_ptr<ThreadPool> pool_;
  std::vector<float> ln1_, ln2_, bqkv_, bo_, norm_;  // per layer, widened to fp32 (small)
  std::vector<void*> kc_, vc_;
  int capacity_ = 0, rows_ = 0;
  std::vector<float> x_, h_, qkv_, att_, gu_, act_, logits_;
  AttentionScratch att_scratch_;
};

}  // namespace la
