#include "lookahead/model/config.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lookahead/model/gguf_model.h"
#include "lookahead/model/model_dir.h"
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

namespace {

// Python's json.dump writes NaN and Infinity as bare words, which JSON (and nlohmann) refuses, and nlohmann refuses
// a number beyond double's range (1e400): name the field that holds one. `error` is nlohmann's message.
std::string nan_field(const std::string& text, const std::string& error) {
  std::vector<std::string> words = {"NaN", "Infinity"};
  const size_t o = error.find("number overflow parsing '");
  if (o != std::string::npos) {
    const size_t b = o + 25, e = error.find('\'', b);
    if (e != std::string::npos && e > b) words.push_back(error.substr(b, e - b));
  }
  for (const auto& w : words)
    for (size_t p = text.find(w); p != std::string::npos; p = text.find(w, p + 1)) {
      size_t q = p;
      if (q > 0 && text[q - 1] == '-') --q;
      while (q > 0 && std::isspace(static_cast<unsigned char>(text[q - 1]))) --q;
      if (q == 0 || text[q - 1] != ':') continue;
      --q;
      while (q > 0 && std::isspace(static_cast<unsigned char>(text[q - 1]))) --q;
      if (q < 2 || text[q - 1] != '"') continue;
      const size_t open = text.rfind('"', q - 2);
      if (open == std::string::npos) continue;
      return text.substr(open + 1, q - 2 - open);
    }
  return "";
}

// A soft-capping value: absent -> the architecture's default, null -> off, else a positive finite number.
double softcap(const json& j, const char* key, double def, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (it->is_null()) return 0;
  LA_CHECK(it->is_number(), origin, ": field '", key, "' must be a number or null (", it->dump(), ")");
  const double v = it->get<double>();
  LA_CHECK(std::isfinite(v) && v > 0, origin, ": field '", key, "' must be positive and finite (", v,
           "); null turns soft-capping off");
  return v;
}

void parse_rope(const json& r, ModelConfig& c, const std::string& origin) {
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

}  // namespace

ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_json,
                               const std::string& origin) {
  json j;
  try {
    j = parse_json(config_json);
  } catch (const std::exception& e) {
    const std::string f = nan_field(config_json, e.what());
    LA_CHECK(f.empty(), origin, ": field '", f, "' is NaN or infinite (and not valid JSON)");
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
  static const char* kSupported[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                     "Qwen3ForCausalLM", "Phi3ForCausalLM",    "Gemma2ForCausalLM",
                                     "Gemma3ForCausalLM"};
  std::string all;
  bool ok = false;
  for (auto* s : kSupported) {
    ok = ok || c.architecture == s;
    all += (all.empty() ? "" : ", ") + std::string(s);
  }
  LA_CHECK(ok, origin, ": unsupported architecture '", c.architecture, "' in field 'architectures' (supported: ",
           all, ")");
  const std::string& a = c.architecture;
  const bool qwen2 = a == "Qwen2ForCausalLM", qwen3 = a == "Qwen3ForCausalLM", phi3 = a == "Phi3ForCausalLM",
             gemma2 = a == "Gemma2ForCausalLM", gemma3 = a == "Gemma3ForCausalLM", mistral = a == "MistralForCausalLM";
  c.hidden = req_int(j, "hidden_size", origin);
  c.intermediate = req_int(j, "intermediate_size", origin);
  c.layers = req_int(j, "num_hidden_layers", origin);
  c.heads = req_int(j, "num_attention_heads", origin);
  c.kv_heads = int_or(j, "num_key_value_heads", c.heads);
  c.head_dim = int_or(j, "head_dim", c.heads > 0 ? c.hidden / c.heads : 0);
  c.vocab = req_int(j, "vocab_size", origin);
  c.max_positions = int_or(j, "max_position_embeddings", 2048);
  c.rms_eps = get_or<double>(j, "rms_norm_eps", 1e-6);
  c.rope_theta = get_or<double>(j, "rope_theta", gemma3 ? 1e6 : 10000.0);
  if (c.model_type == "qwen2" || qwen2) c.attention_bias = true;
  c.attention_bias = get_or<bool>(j, "attention_bias", c.attention_bias);
  c.mlp_bias = get_or<bool>(j, "mlp_bias", false);
  c.tie_word_embeddings = get_or<bool>(j, "tie_word_embeddings", gemma2 || gemma3);
  c.source_dtype = get_or<std::string>(j, "torch_dtype", get_or<std::string>(j, "dtype", "float32"));
  // Gemma names its activation "hidden_activation" (and may carry a stale "hidden_act" beside it).
  const bool gemma = gemma2 || gemma3;
  const char* act_key = gemma && j.contains("hidden_activation") && !j["hidden_activation"].is_null()
                            ? "hidden_activation" : "hidden_act";
  c.hidden_act = get_or<std::string>(j, act_key, gemma ? "gelu_pytorch_tanh" : "silu");
  if (c.hidden_act == "swish") c.hidden_act = "silu";
  if (c.hidden_act == "gelu_tanh") c.hidden_act = "gelu_pytorch_tanh";
  LA_CHECK(c.hidden_act == "silu" || c.hidden_act == "gelu_pytorch_tanh", origin, ": unsupported ", act_key, " '",
           c.hidden_act, "' (supported: silu, gelu_pytorch_tanh)");
  c.qk_norm = qwen3 || gemma3;
  c.fused_qkv = phi3;
  c.gemma_norms = c.sandwich_norms = gemma;
  if (gemma) {
    const auto it = j.find("query_pre_attn_scalar");
    c.query_pre_attn_scalar = it == j.end() || it->is_null() ? 256.0 : get_or<double>(j, "query_pre_attn_scalar", 256);
    LA_CHECK(std::isfinite(c.query_pre_attn_scalar) && c.query_pre_attn_scalar > 0, origin,
             ": field 'query_pre_attn_scalar' must be positive and finite (", c.query_pre_attn_scalar, ")");
  }
  // transformers' defaults when the field is absent: Gemma-2 caps (50, 30), Gemma-3 does not.
  c.attn_softcap = softcap(j, "attn_logit_softcapping", gemma2 ? 50.0 : 0.0, origin);
  c.final_softcap = softcap(j, "final_logit_softcapping", gemma2 ? 30.0 : 0.0, origin);
  LA_CHECK(gemma || (c.attn_softcap == 0 && c.final_softcap == 0), origin,
           ": soft-capping fields are only supported for Gemma-2/3, not ", a);

  // transformers >= 5 writes "rope_parameters" (with rope_theta inside; Gemma-3 one per layer type), older
  // versions "rope_scaling".
  const char* rope_key = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? "rope_parameters"
                                                                                            : "rope_scaling";
  double partial = get_or<double>(j, "partial_rotary_factor", 1.0);
  if (gemma3) c.local_rope_theta = get_or<double>(j, "rope_local_base_freq", 10000.0);
  if (j.contains(rope_key) && j[rope_key].is_object()) {
    const auto& r = j[rope_key];
    if (r.contains("full_attention") || r.contains("sliding_attention")) {  // per layer type
      if (r.contains("full_attention") && r["full_attention"].is_object())
        parse_rope(r["full_attention"], c, origin);
      if (r.contains("sliding_attention") && r["sliding_attention"].is_object()) {
        const auto& s = r["sliding_attention"];
        const std::string t = get_or<std::string>(s, "rope_type", "default");
        LA_CHECK(t == "default", origin, ": rope_parameters.sliding_attention: unsupported rope_type '", t,
                 "' (supported: default)");
        c.local_rope_theta = get_or<double>(s, "rope_theta", c.local_rope_theta ? c.local_rope_theta : c.rope_theta);
      }
    } else {
      parse_rope(r, c, origin);
      partial = get_or<double>(r, "partial_rotary_factor", partial);
    }
  }
  LA_CHECK(std::isfinite(partial) && partial > 0 && partial <= 1, origin,
           ": field 'partial_rotary_factor' must be in (0, 1] (", partial, ")");
  if (c.head_dim > 0 && partial < 1) {
    c.rotary_dim = static_cast<int>(c.head_dim * partial);  // transformers: int(head_dim * factor)
    LA_CHECK(c.rotary_dim > 0 && c.rotary_dim % 2 == 0, origin, ": field 'partial_rotary_factor' ", partial,
             " gives an odd or empty rotary dimension (", c.rotary_dim, " of head_dim ", c.head_dim, ")");
  }
  if (gemma3 && c.local_rope_theta == 0) c.local_rope_theta = 10000.0;

  // Sliding-window attention: which layers, and the window.
  int window = 0;
  if (j.contains("sliding_window") && !j["sliding_window"].is_null()) {
    window = int_or(j, "sliding_window", 0);
    LA_CHECK(window > 0, origin, ": field 'sliding_window' must be positive or null (", window, ")");
  }
  if ((qwen2 || qwen3) && !get_or<bool>(j, "use_sliding_window", false)) window = 0;  // as transformers
  if (a == "LlamaForCausalLM") window = 0;  // Llama has no sliding window
  std::vector<uint8_t> sl;
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    const auto& lt = j["layer_types"];
    LA_CHECK(c.layers <= 0 || lt.size() == static_cast<size_t>(c.layers), origin, ": field 'layer_types' has ",
             lt.size(), " entries but num_hidden_layers is ", c.layers);
    for (size_t i = 0; i < lt.size(); ++i) {
      const std::string t = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
      LA_CHECK(t == "full_attention" || t == "sliding_attention", origin, ": field 'layer_types'[", i, "] is '", t,
               "' (supported: full_attention, sliding_attention)");
      sl.push_back(t == "sliding_attention");
    }
  } else if (c.layers > 0 && c.layers <= (1 << 12)) {
    const int pattern = gemma2 ? 2 : gemma3 ? int_or(j, "sliding_window_pattern", 6) : 0;
    LA_CHECK(!gemma3 || pattern > 0, origin, ": field 'sliding_window_pattern' must be positive (", pattern, ")");
    const int max_window_layers = int_or(j, "max_window_layers", 28);
    for (int i = 0; i < c.layers; ++i) {
      bool s = false;
      if (gemma) s = (i + 1) % pattern != 0;
      else if (mistral || phi3) s = true;
      else if (qwen2 || qwen3) s = i >= max_window_layers;
      sl.push_back(s);
    }
  }
  bool any = false;
  for (auto x : sl) any = any || x;
  if (window > 0 && any) {
    c.sliding_window = window;
    c.sliding_layers = sl;
    LA_CHECK(window <= c.max_positions, origin, ": field 'sliding_window' (", window,
             ") is larger than the context (max_position_embeddings ", c.max_positions, ")");
  }

  c.bos_id = int_or(j, "bos_token_id", gemma ? 2 : 1);
  if (j.contains("eos_token_id")) c.eos_ids = id_list(j["eos_token_id"], "eos_token_id", origin);
  else if (gemma) c.eos_ids = {1};
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
  c.validate(origin);
  return c;
}

namespace {
// No tensors but a tokenizer: a file with neither (a bad-input test's bare header) keeps the errors below.
bool vocab_only(const GgufFile& f) { return f.tensors().empty() && f.has("tokenizer.ggml.model"); }
}  // namespace

bool is_vocab_only_gguf(const std::string& path) { return is_gguf_path(path) && vocab_only(GgufFile::open(path)); }

ModelConfig load_model_config(const std::string& dir) {
  if (is_gguf_path(dir)) {  // --model FILE.gguf
    const GgufFile f = GgufFile::open(dir);
    // Checked before the architecture: a vocabulary file may name one we do not run (gemma4, bert, ...).
    LA_CHECK(!vocab_only(f), "GGUF '", f.origin(), "' holds no weights: a vocabulary-only GGUF (tokenizer.ggml.* "
             "metadata only); `lookahead tokenize --tokenizer ", dir, "` reads its tokenizer");
    return gguf_model_config(f);
  }
  const ModelDir d(dir);
  const std::string cfg = d.config_text();
  return parse_model_config(cfg, d.generation_config_text(), d.file("config.json"));
}

void ModelConfig::validate(const std::string& origin) const {
  LA_CHECK(hidden > 0 && intermediate > 0 && layers > 0 && heads > 0 && kv_heads > 0 && head_dim > 0 && vocab > 0,
           origin, ": sizes must be positive (hidden ", hidden, ", intermediate ", intermediate, ", layers ", layers,
           ", heads ", heads, ", kv heads ", kv_heads, ", head_dim ", head_dim, ", vocab ", vocab, ")");
  // Upper bounds far above any released model, so that sizes derived from them (parameter_count, the expected
  // tensor list, RoPE tables) neither overflow nor exhaust memory before the checkpoint is read (tests/fuzz found
  // a num_hidden_layers of 2e9 hanging in expected_tensors and hidden x intermediate overflowing int64).
  const auto at_most = [&](const char* field, int64_t v, int64_t max) {
    LA_CHECK(v <= max, origin, ": ", field, " ", v, " is beyond any supported model (at most ", max, ")");
  };
  at_most("hidden_size", hidden, 1 << 20);
  at_most("intermediate_size", intermediate, 1 << 22);
  at_most("num_hidden_layers", layers, 1 << 12);
  at_most("num_attention_heads", heads, 1 << 12);
  at_most("head_dim", head_dim, 1 << 14);
  at_most("num_attention_heads x head_dim", int64_t(heads) * head_dim, 1 << 20);
  at_most("vocab_size", vocab, 1 << 24);
  at_most("max_position_embeddings", max_positions, 1 << 26);
  LA_CHECK(heads % kv_heads == 0, origin, ": num_attention_heads (", heads, ") is not a multiple of num_key_value_heads (",
           kv_heads, ")");
  LA_CHECK(head_dim % 2 == 0, origin, ": head_dim must be even for RoPE (", head_dim, ")");
  LA_CHECK(max_positions > 0, origin, ": max_position_embeddings must be positive");
  LA_CHECK(std::isfinite(rms_eps) && rms_eps > 0, origin, ": rms_norm_eps must be positive and finite");
  LA_CHECK(std::isfinite(rope_theta) && rope_theta > 0, origin, ": rope_theta must be positive and finite");
  if (!rope_scaling.type.empty()) {
    LA_CHECK(std::isfinite(rope_scaling.factor) && rope_scaling.factor > 0, origin, ": rope_scaling factor must be "
             "positive and finite (", rope_scaling.factor, ")");
    LA_CHECK(rope_scaling.original_max_position > 0, origin, ": original_max_position_embeddings must be positive");
  }
  if (rope_scaling.type == "llama3")
    LA_CHECK(std::isfinite(rope_scaling.high_freq_factor) && rope_scaling.low_freq_factor > 0 &&
                 rope_scaling.high_freq_factor > rope_scaling.low_freq_factor,
             origin, ": llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor (", rope_scaling.low_freq_factor,
             ", ", rope_scaling.high_freq_factor, ")");
  LA_CHECK(bos_id >= 0 && bos_id < vocab, origin, ": bos id ", bos_id, " outside the vocabulary");
  for (int e : eos_ids) LA_CHECK(e >= 0 && e < vocab, origin, ": eos id ", e, " outside the vocabulary");
  LA_CHECK(rotary_dim >= 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0, origin, ": rotary dimension ",
           rotary_dim, " (partial_rotary_factor) must be even and at most head_dim ", head_dim);
  LA_CHECK(hidden_act == "silu" || hidden_act == "gelu_pytorch_tanh", origin, ": unsupported hidden_act '",
           hidden_act, "'");
  LA_CHECK(std::isfinite(attn_softcap) && attn_softcap >= 0, origin,
           ": field 'attn_logit_softcapping' must be positive and finite (", attn_softcap, ")");
  LA_CHECK(std::isfinite(final_softcap) && final_softcap >= 0, origin,
           ": field 'final_logit_softcapping' must be positive and finite (", final_softcap, ")");
  LA_CHECK(query_pre_attn_scalar == 0 || (std::isfinite(query_pre_attn_scalar) && query_pre_attn_scalar > 0), origin,
           ": field 'query_pre_attn_scalar' must be positive and finite (", query_pre_attn_scalar, ")");
  LA_CHECK(local_rope_theta == 0 || (std::isfinite(local_rope_theta) && local_rope_theta > 0), origin,
           ": the sliding layers' rope_theta must be positive and finite (", local_rope_theta, ")");
  LA_CHECK(sliding_window >= 0, origin, ": field 'sliding_window' must be positive (", sliding_window, ")");
  LA_CHECK(sliding_window <= max_positions, origin, ": field 'sliding_window' (", sliding_window,
           ") is larger than the context (max_position_embeddings ", max_positions, ")");
  LA_CHECK(sliding_layers.empty() || sliding_layers.size() == static_cast<size_t>(layers), origin,
           ": field 'layer_types' has ", sliding_layers.size(), " entries but num_hidden_layers is ", layers);
}

bool ModelConfig::any_sliding() const {
  for (int l = 0; l < layers; ++l)
    if (is_sliding(l)) return true;
  return false;
}

std::string ModelConfig::features() const {
  std::string f;
  auto add = [&](bool on, const char* name) {
    if (on) f += (f.empty() ? "" : ", ") + std::string(name);
  };
  add(qk_norm, "q/k norms");
  add(rotary() != head_dim, "partial rotary");
  add(hidden_act != "silu", "GeGLU (gelu_pytorch_tanh)");
  add(gemma_norms, "(1 + w) RMSNorm and embedding scale");
  add(sandwich_norms, "sandwich norms");
  add(query_pre_attn_scalar > 0 && query_pre_attn_scalar != head_dim, "query_pre_attn_scalar");
  add(attn_softcap > 0, "attention soft-capping");
  add(final_softcap > 0, "final logit soft-capping");
  add(any_sliding(), "sliding window");
  add(local_rope_theta > 0 && local_rope_theta != rope_theta && any_sliding(), "local RoPE base");
  return f;
}



bool ModelConfig::is_eos(int id) const {
  for (int e : eos_ids) if (e == id) return true;
  return false;
}

int64_t ModelConfig::parameter_count() const {
  const int64_t H = hidden, I = intermediate, D = head_dim;
  int64_t per_layer = H * (heads * D) + 2 * H * (kv_heads * D) + (heads * D) * H + 3 * H * I + 2 * H;
  if (attention_bias) per_layer += heads * D + 2 * kv_heads * D;
  if (qk_norm) per_layer += 2 * D;
  if (sandwich_norms) per_layer += 2 * H;
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
          "tiny-mha", "tiny-gqa-bias", "tiny-wide", "qwen3-0.6b", "phi-3-mini", "gemma-2-2b", "gemma-3-1b",
          "mistral-nemo", "tiny-qwen3", "tiny-phi3", "tiny-gemma2", "tiny-gemma3"};
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
  // The shapes and features of the released config.json files (Qwen/Qwen3-0.6B, microsoft/Phi-3-mini-4k-instruct,
  // google/gemma-2-2b, google/gemma-3-1b-pt, mistralai/Mistral-Nemo-Base-2407).
  else if (n == "qwen3-0.6b") {
    c = make(1024, 3072, 28, 16, 8, 151936, 40960, 1e6, true, 128);
    c.architecture = "Qwen3ForCausalLM"; c.model_type = "qwen3"; c.qk_norm = true;
    c.rms_eps = 1e-6; c.bos_id = 151643; c.eos_ids = {151645, 151643};
  } else if (n == "phi-3-mini") {
    c = make(3072, 8192, 32, 32, 32, 32064, 4096, 1e4, false);
    c.architecture = "Phi3ForCausalLM"; c.model_type = "phi3"; c.fused_qkv = true;
    c.sliding_window = 2047; c.sliding_layers.assign(c.layers, 1);
    c.bos_id = 1; c.eos_ids = {32000, 32001, 32007};
  } else if (n == "gemma-2-2b") {
    c = make(2304, 9216, 26, 8, 4, 256000, 8192, 1e4, true, 256);
    c.architecture = "Gemma2ForCausalLM"; c.model_type = "gemma2";
    c.hidden_act = "gelu_pytorch_tanh"; c.gemma_norms = c.sandwich_norms = true; c.query_pre_attn_scalar = 256;
    c.attn_softcap = 50; c.final_softcap = 30;
    c.sliding_window = 4096;
    for (int l = 0; l < c.layers; ++l) c.sliding_layers.push_back((l + 1) % 2 != 0);
    c.rms_eps = 1e-6; c.bos_id = 2; c.eos_ids = {1, 107};
  } else if (n == "gemma-3-1b") {
    c = make(1152, 6912, 26, 4, 1, 262144, 32768, 1e6, true, 256);
    c.architecture = "Gemma3ForCausalLM"; c.model_type = "gemma3_text";
    c.hidden_act = "gelu_pytorch_tanh"; c.gemma_norms = c.sandwich_norms = c.qk_norm = true;
    c.query_pre_attn_scalar = 256; c.local_rope_theta = 1e4;
    c.sliding_window = 512;
    for (int l = 0; l < c.layers; ++l) c.sliding_layers.push_back((l + 1) % 6 != 0);
    c.rms_eps = 1e-6; c.bos_id = 2; c.eos_ids = {1, 106};
  } else if (n == "mistral-nemo") {
    c = make(5120, 14336, 40, 32, 8, 131072, 1024000, 1e6, false, 128);  // heads x head_dim 4096 != hidden
    c.architecture = "MistralForCausalLM"; c.model_type = "mistral";
  }
  // Each architecture's features in small (the forwards' tests): windows of a few tokens so that tree steps
  // straddle the window edge, soft caps small enough to bite on random weights.
  else if (n == "tiny-qwen3") {
    c = make(64, 160, 3, 4, 2, 320, 512, 1e6, false, 32);  // head_dim x heads (128) != hidden
    c.architecture = "Qwen3ForCausalLM"; c.model_type = "qwen3"; c.qk_norm = true; c.rms_eps = 1e-6;
  } else if (n == "tiny-phi3") {
    c = make(64, 160, 3, 4, 2, 320, 512, 1e4, false);
    c.architecture = "Phi3ForCausalLM"; c.model_type = "phi3"; c.fused_qkv = true; c.rotary_dim = 8;
    c.sliding_window = 9; c.sliding_layers.assign(c.layers, 1);
  } else if (n == "tiny-gemma2") {
    c = make(64, 160, 4, 4, 2, 320, 512, 1e4, true, 16);
    c.architecture = "Gemma2ForCausalLM"; c.model_type = "gemma2";
    c.hidden_act = "gelu_pytorch_tanh"; c.gemma_norms = c.sandwich_norms = true; c.query_pre_attn_scalar = 24;
    c.attn_softcap = 2; c.final_softcap = 3;
    c.sliding_window = 7;
    for (int l = 0; l < c.layers; ++l) c.sliding_layers.push_back((l + 1) % 2 != 0);
    c.rms_eps = 1e-6;
  } else if (n == "tiny-gemma3") {
    c = make(64, 160, 4, 4, 1, 320, 512, 1e6, true, 16);
    c.architecture = "Gemma3ForCausalLM"; c.model_type = "gemma3_text";
    c.hidden_act = "gelu_pytorch_tanh"; c.gemma_norms = c.sandwich_norms = c.qk_norm = true;
    c.query_pre_attn_scalar = 16; c.local_rope_theta = 1e4; c.rope_scaling = {"linear", 4.0, 1.0, 4.0, 8192};
    c.sliding_window = 6;
    for (int l = 0; l < c.layers; ++l) c.sliding_layers.push_back(l != 2);
    c.rms_eps = 1e-6;
  }
  else {
    std::string all;
    for (auto& p : preset_names()) all += (all.empty() ? "" : ", ") + p;
    fail("unknown random model preset '", name, "' (known: ", all, ")");
  }
  c.validate("random:" + name);
  return c;
}

}  // namespace la
