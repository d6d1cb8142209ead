// The CPU step forward (no libtorch): a Llama-family step over the committed KV cache with this folder's kernels
// and one thread pool. TorchLlama (src/engine/torch_llama.cpp) owns the weights and the cache and hands this
// class the GEMM's panel copies of the matrices (made once per model, shared by its forks) and raw views of the
// rest; the ATen forward stays the reference (--kernels off). Memory: the panel copies are a second copy of the
// matrices next to the ATen tensors, which stay for --kernels off forks and the weights' checksum -- except for a
// GGUF served by these kernels alone, whose quantized matrices and embedding have no float copy (embed_rows).
//
// One step of T tokens, activations in fp32, weights and the KV cache in the model's dtype:
//   x = embed[tokens]
//   per layer: h = rmsnorm(x) ; qkv = h Wqkv^T (+b) ; rope(q, k) ; cache[L + i] = k, v (rounded to the dtype)
//              x += attention(q, cache | ancestors) Wo^T (+b) ; h = rmsnorm(x) ; x += swiglu(h Wgu^T) Wd^T
//   logits = rmsnorm(x) Wlm^T   (fp32, [T, V]; a greedy step of a few rows whose caller reads only the argmax
//                                 takes it from the head's int8 sketch and a few exact logits: head_sketch.h)
// and the features of the Llama relatives (ModelConfig's feature fields), each as the ATen reference does it:
//   Qwen3, Gemma-3: per-head RMSNorm of q and k before RoPE (head_norm.h);  Phi-3 variants: RoPE on the first
//   rotary() dims only (rope.h);  Gemma: GeGLU (geglu.h), RMSNorm scaling by (1 + w) (w + 1 widened to fp32 once,
//   then rmsnorm.h), embeddings times sqrt(hidden) rounded to the dtype, sandwich norms (x += norm(attention),
//   x += norm(mlp(norm(x)))), attention scale 1/sqrt(query_pre_attn_scalar); Gemma-2: attention-score and
//   final-logit soft-capping (attention.h, softcap.h); sliding-window layers (Mistral, Phi-3, Gemma-2/3): keys
//   at positions <= pos - window hidden, counted along each token's own path (attention.h); Gemma-3: the sliding
//   layers' own RoPE tables (local base). The cache keeps every row (no ring buffer): a window only limits reads.
// Every kernel keeps a fixed reduction order per output element (see each header), so a token's logits are the
// same bits alone, inside any tree of any size, at any cache length, with any thread count, on any rank.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/backend/cpu/attention.h"
#include "lookahead/backend/cpu/gemm.h"
#include "lookahead/backend/cpu/gemm_quant.h"
#include "lookahead/backend/cpu/head_sketch.h"
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
  const void* qn = nullptr;    // [head_dim] q/k norms (Qwen3, Gemma-3) or null
  const void* kn = nullptr;
  const void* ln_pre_ff = nullptr;   // [hidden] Gemma-2/3's norms around the MLP (ln2 then norms the attention
  const void* ln_post_ff = nullptr;  // output), or null
};

struct CpuModelView {
  WType type = WType::F32;
  const void* embed = nullptr;  // [vocab, hidden], or null when embed_rows is set
  // A GGUF embedding kept in the file (no float copy): row i is dequantized at lookup (model/quant.h's
  // dequantize_row, then rounded to `type`), the value the float copy would hold.
  std::shared_ptr<const QuantRows> embed_rows;
  const void* norm = nullptr;   // [hidden]
  PackedWeight lm_head;
  // The head's int8 sketch (head_sketch.h) when it has one (float panels, no final soft-cap): greedy steps then
  // compute the argmax from it and a few exact logits instead of every logit.
  std::shared_ptr<const HeadSketch> head_sketch;
  std::vector<CpuLayerView> layers;
  const float* rope_cos = nullptr;  // [max_positions, head_dim] fp32
  const float* rope_sin = nullptr;
  const float* rope_cos_local = nullptr;  // Gemma-3's sliding layers (own base), or null: they use the above
  const float* rope_sin_local = nullptr;
};

// A KV cache as the kernels see it: per layer [capacity, kv_heads, head_dim] of the model's type.
struct CpuCache {
  std::vector<void*> k, v;
  int capacity = 0;
};

// One sequence of a batched step: its step (parents relative to it), its cache and committed rows. Its rows follow
// the previous segment's in the forward's activations and logits.
struct CpuSegment {
  const StepInput* in = nullptr;
  const CpuCache* cache = nullptr;
  int L = 0;
  int first_output = 0;  // rows before it get no logits (StepInput::first_output; 0 when the caller reads them all)
  bool argmax_only = false;  // the caller reads only argmax() of its rows (greedy, no logits wanted)
};

class CpuForward {
 public:
  // Why these kernels cannot serve the model ("" when they can).
  static std::string unsupported_reason(const ModelConfig& cfg);

  CpuForward(const ModelConfig& cfg, const CpuModelView& w, std::shared_ptr<ThreadPool> pool);
  ~CpuForward();

  // The cache: per layer [capacity, kv_heads, head_dim] of the model's type (call again after reallocating).
  void set_cache(const std::vector<void*>& k, const std::vector<void*>& v, int capacity);
  const CpuCache& cache() const { return cache_; }
  // Runs the step on L committed rows (writes K/V rows L .. L+T-1; the caller guarantees capacity). The logits of
  // rows first_output .. T-1 are then read with logits_row(), valid until the next run. Buffers grow to the largest
  // step seen, never shrink.
  void run(const StepInput& in, int L, int first_output);
  // Several sequences (requests) in one forward: every GEMM runs over all their rows at once, each row's
  // attention reads its own segment's cache and ancestors; the final norm and the LM head run over the rows with
  // an output only (a prompt chunk beside decoding requests costs no logits). Rows are numbered segment after
  // segment. A row's logits are the same bits as in a forward of its segment alone (the kernels' reduction orders
  // never depend on the rows beside it, nor on which rows have outputs).
  void run(const CpuSegment* segs, int n);
  // Row `row`'s vocab fp32 logits of the last run, or nullptr for a row without output. The rows with outputs are
  // stored one after another in step order, so a segment's output rows are contiguous from its first one. When
  // every segment with outputs was argmax_only and the head has a sketch, the run computed no logits (an error to
  // ask for them): argmax() answers from the sketch, the same ids.
  const float* logits_row(int row) const;
  // Whether the last run answered its argmax from the head's sketch (no logits computed).
  bool sketched() const { return sketched_; }
  // Rows of logits the buffers hold: the most output rows of a step so far (by half again), not its rows.
  size_t logits_rows() const { return logits_.size() / size_t(cfg_.vocab); }
  // Per-row argmax of rows row0 .. row0+T-1 of the last run (lowest index on ties, as ATen's argmax); -1 for a row
  // without output.
  void argmax(int T, int32_t* out, int row0 = 0) const;
  // Commit in place: rows L + idx[j] -> L + j of every layer (idx strictly increasing with idx[j] >= j).
  void commit_rows(const std::vector<int32_t>& idx, int L);

  int threads() const;
  std::string describe() const;

 private:
  void grow(int T, int keys);
  void layer(int l, const CpuSegment* segs, int n, int T);

  ModelConfig cfg_;
  CpuModelView w_;
  std::shared_ptr<ThreadPool> pool_;
  std::vector<float> ln1_, ln2_, bqkv_, bo_, norm_;  // per layer, widened to fp32 (small); Gemma: 1 + w
  std::vector<float> qn_, kn_, pre_ff_, post_ff_;     // the same for the optional norms (empty when absent)
  float embed_scale_ = 1.f;                           // Gemma: sqrt(hidden) rounded to the dtype
  std::vector<float> erow_;                           // one embedding row dequantized (w_.embed_rows)
  CpuCache cache_;
  int rows_ = 0;
  std::vector<int32_t> positions_;      // the step's positions, segment after segment
  std::vector<AttentionSegment> att_;  // per segment, its layer's cache set per layer
  std::vector<float> x_, h_, a_, qkv_, attn_, gu_, act_, logits_;  // a_: a branch's output before its sandwich norm
  std::vector<int32_t> logit_row_;  // per step row: its row in h_'s final norm and in logits_, or -1 (no output)
  bool sketched_ = false;           // the last run's argmax came from the sketch: best_ holds it, logits_ nothing
  std::vector<int32_t> best_;       // per output row, the argmax (sketched runs)
  SketchScratch sketch_scratch_;
  AttentionScratch att_scratch_;
};

}  // namespace la
