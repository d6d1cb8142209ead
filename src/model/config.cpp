#include "lookahead/model/config.h"

#include <cmath>
#include <limits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lookahead/model/step_model.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "lookahead/util/json_parse.h"

namespace la {
namespace {

using json = nlohmann::json;

template <class T>
T get_or(const json& j, const char* key, T def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  try {
    return it->get<T>();
  } catch (const std::exception&) {
    fail("config: field '", key, "' has the wrong type (", it->type_name(), ")");
  }
}

// An int field: a JSON integer, or an integral float such as 64.0, within int's range. get<int>() would wrap a
// larger integer (4294967304 -> 8) and a float cast out of range is undefined behaviour, so either would accept
// a model other than the one the file describes (found by tests/fuzz).
bool to_int(const json& v, int& out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int>::max())) return false;
    out = static_cast<int>(u);
    return true;
  }
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) return false;
    out = static_cast<int>(x);
    return true;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(d >= std::numeric_limits<int>::min() && d <= std::numeric_limits<int>::max()) || d != std::floor(d))
      return false;
    out = static_cast<int>(d);
    return true;
  }
  return false;
}

int int_or(const json& j, const char* key, int def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  int v = 0;
  LA_CHECK(to_int(*it, v), "config: field '", key, "' is not an integer in range (",
           it->is_number() ? it->dump() : std::string(it->type_name()), ")");
  return v;
}

int req_int(const json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  int v = 0;
  LA_CHECK(it != j.end() && it->is_number_integer(), origin, ": missing or non-integer field '", key, "'");
  LA_CHECK(to_int(*it, v), origin, ": field '", key, "' is out of range (", it->dump(), ")");
  return v;
}

std::vector<int> id_list(const json& v, const char* key, const std::string& origin) {
  std::vector<int> out;
  int id = 0;
  auto add = [&](const json& x) {
    LA_CHECK(to_int(x, id) && x.is_number_integer(), origin, ": '", key, "' holds ", x.dump(),
             ", not a token id");
    out.push_back(id);
  };
  if (v.is_number_integer()) add(v);
  else if (v.is_array())
    for (auto& x : v) if (x.is_number()) add(x);
  return out;
}

}  // namespace

ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_json,
                               const std::string& origin) {
  json j;
  try {
    j = parse_json(config_json);
  } catch (const std::exception& e) {
    fail(origin, ": invalid JSON (", e.what(), ")");
  }
  LA_CHECK(j.is_object(), origin, ": not a JSON object");
  ModelConfig c;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty()) {
    // Not a string: an uncaught nlohmann type_error before (found by tests/fuzz).
    LA_CHECK(j["architectures"][0].is_string(), origin, ": \"architectures\" must hold strings");
    c.architecture = j["architectures"][0].get<std::string>();
  }
  c.model_type = get_or<std::string>(j, "model_type", "llama");
  static const char* kSupported[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"};
  bool ok = false;
  for (auto* s : kSupported) ok = ok || c.architecture == s;
  LA_CHECK(ok, origin, ": unsupported architecture '", c.architecture,
           "' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)");
  c.hidden = req_int(j, "hidden_size", origin);
  c.intermediate = req_int(j, "intermediate_size", origin);
  c.layers = req_int(j, "num_hidden_layers", origin);
  c.heads = req_int(j, "num_attention_heads", origin);
  c.kv_heads = int_or(j, "num_key_value_heads", c.heads);
  c.head_dim = int_or(j, "head_dim", c.heads > 0 ? c.hidden / c.heads : 0);
  c.vocab = req_int(j, "vocab_size", origin);
  c.max_positions = int_or(j, "max_position_embeddings", 2048);
  c.rms_eps = get_or<double>(j, "rms_norm_eps", 1e-6);
  c.rope_theta = get_or<double>(j, "rope_theta", 10000.0);
  if (c.model_type == "qwen2" || c.architecture == "Qwen2ForCausalLM") c.attention_bias = true;
  c.attention_bias = get_or<bool>(j, "attention_bias", c.attention_bias);
  c.mlp_bias = get_or<bool>(j, "mlp_bias", false);
  c.tie_word_embeddings = get_or<bool>(j, "tie_word_embeddings", false);
  c.source_dtype = get_or<std::string>(j, "torch_dtype", get_or<std::string>(j, "dtype", "float32"));
  const std::string act = get_or<std::string>(j, "hidden_act", "silu");
  LA_CHECK(act == "silu" || act == "swish", origin, ": unsupported hidden_act '", act, "' (only silu)");
  // transformers >= 5 writes "rope_parameters" (with rope_theta inside); older versions "rope_scaling".
  const char* rope_key = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? "rope_parameters"
                                                                                            : "rope_scaling";
  if (j.contains(rope_key) && j[rope_key].is_object()) {
    const auto& r = j[rope_key];
    c.rope_theta = get_or<double>(r, "rope_theta", c.rope_theta);
    c.rope_scaling.type = get_or<std::string>(r, "rope_type", get_or<std::string>(r, "type", ""));
    if (c.rope_scaling.type == "default") c.rope_scaling.type = "";
    c.rope_scaling.factor = get_or<double>(r, "factor", 1.0);
    c.rope_scaling.low_freq_factor = get_or<double>(r, "low_freq_factor", 1.0);
    c.rope_scaling.high_freq_factor = get_or<double>(r, "high_freq_factor", 4.0);
    c.rope_scaling.original_max_position = int_or(r, "original_max_position_embeddings", 8192);
    LA_CHECK(c.rope_scaling.type.empty() || c.rope_scaling.type == "llama3" || c.rope_scaling.type == "linear",
             origin, ": unsupported rope_scaling type '", c.rope_scaling.type, "' (supported: llama3, linear)");
  }
  c.bos_id = int_or(j, "bos_token_id", 1);
  if (j.contains("eos_token_id")) c.eos_ids = id_list(j["eos_token_id"], "eos_token_id", origin);
  if (!generation_json.empty()) {
    json g;
    try {
      g = parse_json(generation_json);
    } catch (const std::exception& e) {
      fail(origin, ": invalid generation_config.json (", e.what(), ")");
    }
    if (g.contains("eos_token_id")) {
      auto ids = id_list(g["eos_token_id"], "eos_token_id", origin + " (generation_config.json)");
      if (!ids.empty()) c.eos_ids = ids;
    }
    if (g.contains("bos_token_id") && g["bos_token_id"].is_number_integer())
      c.bos_id = int_or(g, "bos_token_id", c.bos_id);
  }
  c.validate();
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  LA_CHECK(is_directory(dir), "model directory '", dir, "' does not exist");
  const std::string cfg = dir + "/config.json";
  LA_CHECK(file_exists(cfg), "model directory '", dir, "' has no config.json");
  std::string gen;
  if (file_exists(dir + "/generation_config.json")) gen = read_file(dir + "/generation_config.json");
  return parse_model_config(read_file(cfg), gen, cfg);
}

void ModelConfig::validate() const {
  LA_CHECK(hidden > 0 && intermediate > 0 && layers > 0 && heads > 0 && kv_heads > 0 && head_dim > 0 && vocab > 0,
           "config: sizes must be positive (hidden ", hidden, ", intermediate ", intermediate, ", layers ", layers,
           ", heads ", heads, ", kv heads ", kv_heads, ", head_dim ", head_dim, ", vocab ", vocab, ")");
  // Upper bounds far above any released model, so that sizes derived from them (parameter_count, the expected
  // tensor list, RoPE tables) neither overflow nor exhaust memory before the checkpoint is read (tests/fuzz found
  // a num_hidden_layers of 2e9 hanging in expected_tensors and hidden x intermediate overflowing int64).
  const auto at_most = [](const char* field, int64_t v, int64_t max) {
    LA_CHECK(v <= max, "config: ", field, " ", v, " is beyond any supported model (at most ", max, ")");
  };
  at_most("hidden_size", hidden, 1 << 20);
  at_most("intermediate_size", intermediate, 1 << 22);
  at_most("num_hidden_layers", layers, 1 << 12);
  at_most("num_attention_heads", heads, 1 << 12);
  at_most("head_dim", head_dim, 1 << 14);
  at_most("num_attention_heads x head_dim", int64_t(heads) * head_dim, 1 << 20);
  at_most("vocab_size", vocab, 1 << 24);
  at_most("max_position_embeddings", max_positions, 1 << 26);
  LA_CHECK(heads % kv_heads == 0, "config: num_attention_heads (", heads, ") is not a multiple of num_key_value_heads (",
           kv_heads, ")");
  LA_CHECK(head_dim % 2 == 0, "config: head_dim must be even for RoPE (", head_dim, ")");
  LA_CHECK(max_positions > 0, "config: max_position_embeddings must be positive");
  LA_CHECK(std::isfinite(rms_eps) && rms_eps > 0, "config: rms_norm_eps must be positive and finite");
  LA_CHECK(std::isfinite(rope_theta) && rope_theta > 0, "config: rope_theta must be positive and finite");
  if (!rope_scaling.type.empty()) {
    LA_CHECK(std::isfinite(rope_scaling.factor) && rope_scaling.factor > 0, "config: rope_scaling factor must be "
             "positive and finite (", rope_scaling.factor, ")");
    LA_CHECK(rope_scaling.original_max_position > 0, "config: original_max_position_embeddings must be positive");
  }
  if (rope_scaling.type == "llama3")
    LA_CHECK(std::isfinite(rope_scaling.high_freq_factor) && rope_scaling.low_freq_factor > 0 &&
                 rope_scaling.high_freq_factor > rope_scaling.low_freq_factor,
             "config: llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor (", rope_scaling.low_freq_factor,
             ", ", rope_scaling.high_freq_factor, ")");
  LA_CHECK(bos_id >= 0 && bos_id < vocab, "config: bos id ", bos_id, " outside the vocabulary");
  for (int e : eos_ids) LA_CHECK(e >= 0 && e < vocab, "config: eos id ", e, " outside the vocabulary");
}

bool ModelConfig::is_eos(int id) const {
  for (int e : eos_ids) if (e == id) return true;
  return false;
}

int64_t ModelConfig::parameter_count() const {
  const int64_t H = hidden, I = intermediate, D = head_dim;
  int64_t per_layer = H * (heads * D) + 2 * H * (kv_heads * D) + (heads * D) * H + 3 * H * I + 2 * H;
  if (attention_bias) per_layer += heads * D + 2 * kv_heads * D;
  int64_t total = per_layer * layers + int64_t(vocab) * H + H;
  if (!tie_word_embeddings) total += int64_t(vocab) * H;
  return total;
}

namespace {
ModelConfig make(int h, int i, int l, int nh, int kv, int v, int maxpos, double theta, bool tied, int hd = 0) {
  ModelConfig c;
  c.hidden = h; c.intermediate = i; c.layers = l; c.heads = nh; c.kv_heads = kv; c.vocab = v;
  c.max_positions = maxpos; c.rope_theta = theta; c.tie_word_embeddings = tied;
  c.head_dim = hd ? hd : h / nh;
  c.rms_eps = 1e-5;
  c.bos_id = 1;
  c.eos_ids = {2};
  return c;
}
}  // namespace

std::vector<std::string> preset_names() {
  return {"stories260k", "llama2xs", "tinyllama-1.1b", "llama-2-7b", "smollm2-360m", "llama-3.2-1b", "qwen2-0.5b",
          "tiny-mha", "tiny-gqa-bias", "tiny-wide"};
}

ModelConfig preset_config(const std::string& name) {
  std::string n;
  for (char ch : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  ModelConfig c;
  if (n == "stories260k") c = make(64, 172, 5, 8, 4, 512, 512, 1e4, true);
  else if (n == "llama2xs") c = make(64, 192, 5, 8, 4, 512, 256, 1e4, true);
  else if (n == "tinyllama-1.1b") c = make(2048, 5632, 22, 32, 4, 32000, 2048, 1e4, false);
  else if (n == "llama-2-7b") c = make(4096, 11008, 32, 32, 32, 32000, 4096, 1e4, false);
  else if (n == "smollm2-360m") { c = make(960, 2560, 32, 15, 5, 49152, 8192, 1e5, true); c.eos_ids = {0}; c.bos_id = 0; }
  else if (n == "llama-3.2-1b") {
    c = make(2048, 8192, 16, 32, 8, 128256, 131072, 5e5, true);
    c.rope_scaling = {"llama3", 32.0, 1.0, 4.0, 8192};
    c.bos_id = 128000; c.eos_ids = {128001, 128008, 128009};
  } else if (n == "qwen2-0.5b") {
    c = make(896, 4864, 24, 14, 2, 151936, 32768, 1e6, true);
    c.attention_bias = true; c.architecture = "Qwen2ForCausalLM"; c.model_type = "qwen2";
    c.rms_eps = 1e-6; c.bos_id = 151643; c.eos_ids = {151643, 151645};
  } else if (n == "tiny-mha") c = make(96, 256, 3, 6, 6, 300, 512, 1e4, false);
  else if (n == "tiny-gqa-bias") { c = make(64, 160, 3, 8, 2, 320, 512, 5e5, true); c.attention_bias = true; }
  // Weights of 1-4 MiB (MLP, head): large enough that the CPU kernels split them over threads.
  else if (n == "tiny-wide") { c = make(256, 1024, 2, 4, 2, 4096, 512, 1e4, true); c.attention_bias = true; }
  else {
    std::string all;
    for (auto& p : preset_names()) all += (all.empty() ? "" : ", ") + p;
    fail("unknown random model preset '", name, "' (known: ", all, ")");
  }
  c.validate();
  return c;
}


}  // namespace la
