// Llama-family model configuration (config.json + generation_config.json). No libtorch.
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

  // Validates sizes; throws la::Error naming the offending field.
  void validate() const;
  bool is_eos(int id) const;
  // Parameter count (weights only).
  int64_t parameter_count() const;
};

// Reads DIR/config.json and (if present) DIR/generation_config.json.
ModelConfig load_model_config(const std::string& dir);
// Parses config.json text (and optional generation_config.json text, may be empty).
ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_json,
                               const std::string& origin);

// Presets for `random:NAME[:SEED]` models.
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace la
