// The model's weights as ATen tensors (private to src/engine; includes ATen): loading from safetensors or drawing
// random presets, fusing q/k/v and gate/up, Hugging Face names, the cross-rank checksum and saving.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/backend/cpu/gemm_quant.h"
#include "lookahead/model/config.h"
#include "lookahead/model/gguf.h"
#include "lookahead/engine/llama.h"

namespace la {

// One decoder layer's weights (q/k/v and gate/up fused, so each step reads them in one GEMM). Optional (undefined
// unless the architecture has them): qn/kn the per-head q/k norms (Qwen3, Gemma-3), ln_pre_ff/ln_post_ff the
// norms around the MLP (Gemma-2/3, where ln2 is the norm of the attention output).
struct LayerW {
  at::Tensor ln1, wqkv, bqkv, wo, bo, ln2, wgu, wd;
  at::Tensor qn, kn, ln_pre_ff, ln_post_ff;
};

// Every weight of a model on one device in one dtype. Shared (read-only) by every replica forked from a model.
struct TorchWeights {
  ModelConfig cfg;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::Device(at::kCPU);
  at::Tensor embed, norm, lm_head;  // lm_head aliases embed for tied embeddings
  std::vector<LayerW> layers;
  // The tensors under their Hugging Face names, less the ones fused into wqkv/bqkv/wgu (hf_named rebuilds those as
  // views): one copy of every weight in memory.
  std::map<std::string, at::Tensor> unfused;
  // GGUF matrices the CPU kernels read quantized (include/lookahead/backend/cpu/gemm_quant.h), keyed by quant_key of
  // the tensor each stands for (embed/lm_head, wqkv, wo, wgu, wd); the file stays mapped (quant_source).
  // Empty for directories, CUDA, and LOOKAHEAD_GGUF_QUANT=dequant. quant_note: the load line's words for it.
  std::map<const void*, QuantRows> quant;
  std::shared_ptr<const GgufFile> quant_source;
  std::string quant_note;
  // With floats_dropped: the embedding's rows in the file, dequantized one at a time by the CPU forward at lookup
  // (embed is then a meta tensor); else null.
  std::shared_ptr<const QuantRows> embed_rows;
  // With floats_dropped: the GEMM panels (pack_weight) of the matrices that stay float, made at load and keyed by
  // quant_key of their tensors, which are then meta tensors too (the kernels, the one forward that can run, read
  // only the panels: one copy instead of two).
  std::map<const void*, PackedWeight> packed;
  // Whether the float copies of the matrices kept quantized and of the embedding were never made: those tensors
  // are shape-only meta tensors, keyed in `quant` by quant_key (the embedding: embed_rows), and only the CPU
  // kernel forward can run (load_weights makes no float copy only for --kernels on without --selfcheck).
  bool floats_dropped = false;
};

// The key of `quant` for a weight tensor: its data pointer, or for a dropped float copy (a meta tensor) its impl.
inline const void* quant_key(const at::Tensor& t) {
  return t.is_meta() ? static_cast<const void*>(t.unsafeGetTensorImpl()) : t.data_ptr();
}

at::ScalarType parse_dtype(const std::string& s);
// Loads (or, for random: models, draws) o.model's weights onto `dev` in `dt`.
std::shared_ptr<const TorchWeights> load_weights(const LoadOptions& o, at::Device dev, at::ScalarType dt);
// Every weight under its Hugging Face name (q/k/v and gate/up as views of the fused tensors).
std::map<std::string, at::Tensor> hf_named(const TorchWeights& w);
// Exact and order-independent per tensor (see the definition).
uint64_t weights_checksum(const TorchWeights& w);
// config.json, generation_config.json and an F32 model.safetensors in `dir`.
void save_weights_hf(const TorchWeights& w, const std::string& dir);
// The weights behind a model loaded by load_llama (nullptr for other StepModels).
const TorchWeights* torch_weights_of(const StepModel& m);

}  // namespace la
