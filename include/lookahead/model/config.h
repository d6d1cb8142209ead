// Decoder-only model configuration (config.json + generation_config.json) of the Llama family and its relatives
// (Mistral, Qwen2/3, Phi-3, Gemma-2/3): one struct whose feature fields say how each differs from Llama. No libtorch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace la {

struct RopeScaling {
  std::string type;               // "" (none), "llama3", "linear"
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int original_max_position = 8192;
};

struct ModelConfig {
  std::string architecture = "LlamaForCausalLM";
  std::string model_type = "llama";
  int hidden = 0;
  int intermediate = 0;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int vocab = 0;
  int max_positions = 0;
  double rms_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  bool mlp_bias = false;
  bool tie_word_embeddings = false;
  int bos_id = 1;
  std::vector<int> eos_ids{2};
  std::string source_dtype = "float32";

  // ---- features beyond Llama (all off for Llama, Mistral without a window, Qwen2) ----
  bool qk_norm = false;          // Qwen3, Gemma-3: RMSNorm of each head's q and k (q_norm, k_norm) before RoPE
  bool fused_qkv = false;        // Phi-3: the checkpoint holds self_attn.qkv_proj and mlp.gate_up_proj
  int rotary_dim = 0;            // dims of each head RoPE rotates (head_dim x partial_rotary_factor); 0: head_dim
  std::string hidden_act = "silu";  // silu | gelu_pytorch_tanh (Gemma's GeGLU)
  bool gemma_norms = false;      // Gemma: RMSNorm scales by (1 + w) in fp32; embeddings are scaled by sqrt(hidden)
  bool sandwich_norms = false;   // Gemma-2/3: post_attention_layernorm on the attention output, and
                                 // pre_/post_feedforward_layernorm around the MLP
  double query_pre_attn_scalar = 0;  // Gemma: attention scale 1/sqrt(this); 0: 1/sqrt(head_dim)
  double attn_softcap = 0;       // Gemma-2: scores = cap * tanh(scores / cap); 0: off
  double final_softcap = 0;      // Gemma-2: the same on the logits; 0: off
  int sliding_window = 0;        // sliding layers attend to keys at positions > pos - sliding_window; 0: none
  std::vector<uint8_t> sliding_layers;  // per layer, 1 = a sliding-window layer (empty: none)
  double local_rope_theta = 0;   // Gemma-3: RoPE base of the sliding layers, unscaled (0: as the full layers)

  int rotary() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  bool is_sliding(int layer) const {
    return sliding_window > 0 && layer >= 0 && layer < static_cast<int>(sliding_layers.size()) && sliding_layers[layer];
  }
  bool any_sliding() const;
  // The features of this config that a forward may lack (e.g. "sliding window, attention soft-capping"); "" for a
  // plain Llama. Forwards that do not implement them name them when refusing the model.
  std::string features() const;

  // Validates sizes; throws la::Error naming the offending field, prefixed with `origin` (the file).
  void validate(const std::string& origin = "config") const;
  bool is_eos(int id) const;
  // Parameter count (weights only).
  int64_t parameter_count() const;
};

// Reads DIR/config.json and (if present) DIR/generation_config.json; for a GGUF file, its metadata (a vocabulary-only
// GGUF, is_vocab_only_gguf, is one la::Error saying so).
ModelConfig load_model_config(const std::string& dir);
// Whether `path` is a GGUF file that holds no tensors but a tokenizer: a vocabulary-only GGUF (tokenizer.ggml.*, as
// llama.cpp's models/ggml-vocab-*.gguf), whose tokenizer `lookahead tokenize` reads without a model config.
bool is_vocab_only_gguf(const std::string& path);
// Parses config.json text (and optional generation_config.json text, may be empty).
ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_json,
                               const std::string& origin);

// Presets for `random:NAME[:SEED]` models.
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace la
