// A GGUF file as a model: the ModelConfig from its metadata (architectures llama/mistral, qwen2, qwen3, phi3,
// gemma2, gemma3) and its tensors mapped to the Hugging Face names the weight loader expects, with what the
// llama.cpp converter changed undone: q/k rows of llama-architecture files (permuted for ggml's adjacent-pair RoPE;
// the engine rotates halves, as Hugging Face does) and Gemma's norm weights (stored as 1 + w). No libtorch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lookahead/model/config.h"
#include "lookahead/model/gguf.h"

namespace la {

// The config of a GGUF model; throws la::Error naming the file and the metadata key that is missing or wrong.
ModelConfig gguf_model_config(const GgufFile& f);

// One weight the loader needs, by its Hugging Face name, and where it comes from.
struct GgufWeight {
  std::string name;            // e.g. model.layers.0.self_attn.q_proj.weight
  std::vector<int64_t> shape;  // row-major, outermost first
  const GgufTensor* tensor = nullptr;
  int unpermute_heads = 0;     // > 0: undo the converter's RoPE row permutation over this many heads
  bool minus_one = false;      // Gemma norm weights: the file holds 1 + w
};

// Every tensor expected_tensors(c) lists (plus an optional o_proj bias), checked for presence, shape and a type
// this build can dequantize; throws naming the first tensor that is missing or wrong.
std::vector<GgufWeight> gguf_weights(const GgufFile& f, const ModelConfig& c);
// The weight's values in fp32, row-major (shape's element count floats at out).
void gguf_dequantize(const GgufWeight& w, float* out);
// Where each row of the weight (in Hugging Face row order, the permutation undone) starts in the file.
std::vector<const uint8_t*> gguf_rows(const GgufWeight& w);
// What the file's weights are, for the load line: "Q4_K_M" (general.file_type), else the types by count.
std::string gguf_weights_summary(const GgufFile& f);

}  // namespace la
