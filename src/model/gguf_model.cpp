// GGUF metadata -> ModelConfig and GGUF tensors -> the Hugging Face weights (include/lookahead/model/gguf_model.h).
//
// The metadata keys are llama.cpp's ("{arch}.embedding_length", "{arch}.attention.head_count", ...). What a GGUF
// does not store, llama.cpp hard-codes per architecture, and so does this file, with the same values:
// Gemma-2/3 attention scale 1/sqrt(head_dim) (1/sqrt(hidden/heads) for the 27B models), Gemma-3's sliding-window
// pattern (5 sliding layers, then one full) and its sliding layers' RoPE base 10000, Gemma-2's soft caps (50, 30)
// when absent. Llama-3 RoPE scaling is stored as a tensor of per-frequency divisors (rope_freqs.weight); it is
// accepted when it equals the llama3 rule for some factor with the released low/high frequency factors (1, 4) and
// original context (8192), and refused by name otherwise.
#include "lookahead/model/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "lookahead/model/quant.h"
#include "lookahead/model/safetensors.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

struct Arch {
  const char* gguf;
  const char* hf;
  const char* model_type;
};
constexpr Arch kArchs[] = {
    {"llama", "LlamaForCausalLM", "llama"},       {"mistral", "MistralForCausalLM", "mistral"},
    {"qwen2", "Qwen2ForCausalLM", "qwen2"},       {"qwen3", "Qwen3ForCausalLM", "qwen3"},
    {"phi3", "Phi3ForCausalLM", "phi3"},          {"gemma2", "Gemma2ForCausalLM", "gemma2"},
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text"},
};

// An integer hyper-parameter that llama.cpp allows per layer (an array): all layers must agree here.
int layer_int(const GgufFile& f, const std::string& key, int64_t def, bool required) {
  const GgufValue* v = f.find(key);
  if (!v) {
    LA_CHECK(!required, "GGUF '", f.origin(), "': metadata '", key, "' is missing");
    return static_cast<int>(def);
  }
  int64_t x = 0;
  if (v->kind == GgufKind::ARRAY) {
    LA_CHECK(!v->ints.empty(), "GGUF '", f.origin(), "': metadata '", key, "' must be an integer or an integer array");
    x = v->ints[0];
    for (auto y : v->ints)
      LA_CHECK(y == x, "GGUF '", f.origin(), "': metadata '", key, "' differs between layers (", x, " and ", y,
               "); models with per-layer sizes are not supported");
  } else {
    x = f.get_int(key, def);
  }
  LA_CHECK(x >= 0 && x <= (int64_t(1) << 30), "GGUF '", f.origin(), "': metadata '", key, "' is out of range (", x, ")");
  return static_cast<int>(x);
}

// Llama-3's rope_freqs.weight: the divisor of each inverse frequency. Returns true (and sets c.rope_scaling) when
// it is the llama3 rule with low/high frequency factors (1, 4) and an original context of 8192.
bool match_llama3_freqs(const std::vector<float>& div, ModelConfig& c) {
  if (div.empty()) return false;
  const double factor = *std::max_element(div.begin(), div.end());
  const double lo = 1.0, hi = 4.0, orig = 8192.0;
  const int half = static_cast<int>(div.size());
  for (int i = 0; i < half; ++i) {
    const double inv = std::pow(c.rope_theta, -2.0 * i / (2.0 * half));
    const double wavelen = 2 * M_PI / inv;
    double want;
    if (wavelen < orig / hi) want = 1.0;
    else if (wavelen > orig / lo) want = factor;
    else {
      const double smooth = (orig / wavelen - lo) / (hi - lo);
      want = inv / ((1 - smooth) * inv / factor + smooth * inv);
    }
    if (std::fabs(want - div[i]) > 1e-3 * want) return false;
  }
  c.rope_scaling = {"llama3", factor, lo, hi, static_cast<int>(orig)};
  return true;
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
  const std::string& o = f.origin();
  const std::string arch = f.get_string("general.architecture");
  LA_CHECK(!arch.empty(), "GGUF '", o, "': metadata 'general.architecture' is missing");
  const Arch* A = nullptr;
  std::string all;
  for (const auto& a : kArchs) {
    if (arch == a.gguf) A = &a;
    all += (all.empty() ? "" : ", ") + std::string(a.gguf);
  }
  LA_CHECK(A, "GGUF '", o, "': unsupported architecture '", arch, "' in 'general.architecture' (supported: ", all, ")");
  const std::string p = arch + ".";
  const bool gemma2 = arch == "gemma2", gemma3 = arch == "gemma3", gemma = gemma2 || gemma3;
  const bool phi3 = arch == "phi3", qwen3 = arch == "qwen3";

  ModelConfig c;
  c.architecture = A->hf;
  c.model_type = A->model_type;
  c.hidden = layer_int(f, p + "embedding_length", 0, true);
  c.layers = layer_int(f, p + "block_count", 0, true);
  c.intermediate = layer_int(f, p + "feed_forward_length", 0, true);
  c.heads = layer_int(f, p + "attention.head_count", 0, true);
  c.kv_heads = layer_int(f, p + "attention.head_count_kv", c.heads, false);
  c.head_dim = layer_int(f, p + "attention.key_length", c.heads > 0 ? c.hidden / c.heads : 0, false);
  const int vdim = layer_int(f, p + "attention.value_length", c.head_dim, false);
  LA_CHECK(vdim == c.head_dim, "GGUF '", o, "': attention.value_length (", vdim, ") differs from key_length (",
           c.head_dim, "); not supported");
  c.max_positions = layer_int(f, p + "context_length", 2048, false);
  c.rms_eps = f.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5);
  c.rope_theta = f.get_float(p + "rope.freq_base", gemma3 ? 1e6 : 10000.0);
  const int rot = layer_int(f, p + "rope.dimension_count", c.head_dim, false);
  if (rot > 0 && rot < c.head_dim) c.rotary_dim = rot;

  // RoPE scaling.
  const std::string st = f.get_string(p + "rope.scaling.type", "none");
  if (st == "linear") {
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = f.get_float(p + "rope.scaling.factor", 1.0);
  } else {
    LA_CHECK(st == "none" || st.empty(), "GGUF '", o, "': unsupported RoPE scaling '", st, "' in '", p,
             "rope.scaling.type' (supported: none, linear, and Llama-3's rope_freqs)");
  }
  if (const GgufTensor* rf = f.tensor("rope_freqs.weight")) {
    LA_CHECK(rf->type == uint32_t(QType::F32) && rf->ne.size() == 1 && rf->ne[0] * 2 == c.rotary(), "GGUF '", o,
             "': tensor 'rope_freqs.weight' must be F32 with ", c.rotary() / 2, " values");
    std::vector<float> div(static_cast<size_t>(rf->ne[0]));
    dequantize_row(rf->type, rf->data, div.data(), rf->ne[0]);
    LA_CHECK(match_llama3_freqs(div, c), "GGUF '", o, "': tensor 'rope_freqs.weight' (per-frequency RoPE factors) is "
             "not Llama-3's rule with low/high frequency factors 1 and 4 and an original context of 8192; not supported");
  }
  LA_CHECK(!f.tensor("rope_factors_long.weight") && !f.tensor("rope_factors_short.weight"), "GGUF '", o,
           "': LongRoPE factors (rope_factors_long/short) are not supported");

  // Which tensors exist decides biases, q/k norms and tied embeddings.
  c.attention_bias = f.tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = f.tensor("blk.0.attn_q_norm.weight") != nullptr;
  LA_CHECK(!qwen3 || c.qk_norm, "GGUF '", o, "': a qwen3 file without attn_q_norm tensors");
  c.tie_word_embeddings = f.tensor("output.weight") == nullptr;
  c.fused_qkv = phi3;
  const GgufTensor* emb = f.tensor("token_embd.weight");
  LA_CHECK(emb && emb->ne.size() == 2, "GGUF '", o, "': tensor 'token_embd.weight' is missing or not 2-D");
  LA_CHECK(emb->ne[1] <= (int64_t(1) << 24), "GGUF '", o, "': vocabulary of ", emb->ne[1], " rows is too large");
  c.vocab = static_cast<int>(emb->ne[1]);

  if (gemma) {
    c.hidden_act = "gelu_pytorch_tanh";
    c.gemma_norms = c.sandwich_norms = true;
    const bool big = (gemma2 && c.layers == 46) || (gemma3 && c.layers == 62);  // the 27B models
    c.query_pre_attn_scalar = big && c.heads > 0 ? double(c.hidden / c.heads) : double(c.head_dim);
  }
  if (gemma2) {
    c.attn_softcap = f.get_float(p + "attn_logit_softcapping", 50.0);
    c.final_softcap = f.get_float(p + "final_logit_softcapping", 30.0);
  } else if (gemma3) {
    c.final_softcap = f.get_float(p + "final_logit_softcapping", 0.0);
    c.local_rope_theta = 10000.0;
  }

  // Sliding windows.
  const int window = layer_int(f, p + "attention.sliding_window", 0, false);
  if (window > 0 && c.layers > 0 && c.layers <= (1 << 12)) {
    std::vector<uint8_t> sl(static_cast<size_t>(c.layers), 0);
    const GgufValue* pat = f.find(p + "attention.sliding_window_pattern");
    if (pat && pat->kind == GgufKind::ARRAY) {
      LA_CHECK(pat->ints.size() == sl.size(), "GGUF '", o, "': '", p, "attention.sliding_window_pattern' has ",
               pat->ints.size(), " entries for ", c.layers, " layers");
      for (size_t l = 0; l < sl.size(); ++l) sl[l] = pat->ints[l] != 0;
    } else {
      const int64_t every = pat ? f.get_int(p + "attention.sliding_window_pattern", 6) : gemma2 ? 2 : gemma3 ? 6 : 0;
      LA_CHECK(every >= 0, "GGUF '", o, "': sliding_window_pattern must be positive");
      for (int l = 0; l < c.layers; ++l) sl[l] = every > 0 ? (l + 1) % every != 0 : 1;  // phi3, mistral: all
    }
    if (arch != "llama" && arch != "qwen2" && arch != "qwen3") {
      c.sliding_window = window;
      c.sliding_layers = sl;
    }
  }

  // Special tokens.
  c.bos_id = static_cast<int>(f.get_int("tokenizer.ggml.bos_token_id", gemma ? 2 : 1));
  std::vector<int> eos;
  auto add_eos = [&](int64_t id) {
    if (id >= 0 && id < c.vocab && std::find(eos.begin(), eos.end(), int(id)) == eos.end()) eos.push_back(int(id));
  };
  add_eos(f.get_int("tokenizer.ggml.eos_token_id", gemma ? 1 : 2));
  add_eos(f.get_int("tokenizer.ggml.eot_token_id", -1));
  add_eos(f.get_int("tokenizer.ggml.eom_token_id", -1));
  // llama.cpp also ends generation at the end-of-turn tokens it recognises by text; Gemma's <end_of_turn> is the
  // only one of the supported families that Hugging Face lists as eos without the GGUF naming it.
  if (gemma) {
    const GgufValue* toks = f.find("tokenizer.ggml.tokens");
    if (toks && toks->kind == GgufKind::ARRAY)
      for (size_t i = 0; i < toks->strs.size() && i < size_t(c.vocab); ++i)
        if (toks->strs[i] == "<end_of_turn>") add_eos(int64_t(i));
  }
  if (!eos.empty()) c.eos_ids = eos;
  c.source_dtype = "GGUF " + gguf_weights_summary(f);
  c.validate("GGUF '" + o + "'");
  return c;
}

namespace {

// The GGUF name of a Hugging Face weight name (llama.cpp's tensor naming).
std::string gguf_name(const std::string& hf, bool gemma, bool /*phi3*/) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string pre = "model.layers.";
  if (hf.rfind(pre, 0) != 0) return "";
  const size_t dot = hf.find('.', pre.size());
  const std::string layer = hf.substr(pre.size(), dot - pre.size());
  std::string rest = hf.substr(dot + 1);
  std::string suffix = rest.substr(rest.rfind('.'));  // .weight / .bias
  rest = rest.substr(0, rest.rfind('.'));
  static const std::map<std::string, std::string> common = {
      {"input_layernorm", "attn_norm"},      {"self_attn.q_proj", "attn_q"},    {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},        {"self_attn.o_proj", "attn_output"}, {"self_attn.qkv_proj", "attn_qkv"},
      {"self_attn.q_norm", "attn_q_norm"},   {"self_attn.k_norm", "attn_k_norm"}, {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},             {"mlp.down_proj", "ffn_down"},     {"mlp.gate_up_proj", "ffn_up"},
      {"pre_feedforward_layernorm", "ffn_norm"}, {"post_feedforward_layernorm", "post_ffw_norm"},
  };
  std::string g;
  if (rest == "post_attention_layernorm") g = gemma ? "post_attention_norm" : "ffn_norm";
  else if (auto it = common.find(rest); it != common.end()) g = it->second;
  else return "";
  return "blk." + layer + "." + g + suffix;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r;
  for (auto x : s) r += (r.empty() ? "" : ", ") + std::to_string(x);
  return "[" + r + "]";
}

}  // namespace

std::vector<GgufWeight> gguf_weights(const GgufFile& f, const ModelConfig& c) {
  const std::string arch = f.get_string("general.architecture");
  const bool gemma = c.gemma_norms, phi3 = c.fused_qkv;
  // llama.cpp's converter permutes q/k rows for llama-architecture models only (LlamaModel.permute).
  const bool permuted = arch == "llama" || arch == "mistral";
  auto expected = expected_tensors(c);
  for (int l = 0; l < c.layers; ++l) {  // Llama with attention_bias may carry an o_proj bias too
    const std::string n = "model.layers." + std::to_string(l) + ".self_attn.o_proj.bias";
    if (f.tensor(gguf_name(n, gemma, phi3))) expected.push_back({n, {c.hidden}});
  }
  std::vector<GgufWeight> out;
  for (auto& [name, shape] : expected) {
    GgufWeight w;
    w.name = name;
    w.shape = shape;
    const std::string g = gguf_name(name, gemma, phi3);
    w.tensor = g.empty() ? nullptr : f.tensor(g);
    LA_CHECK(w.tensor, "GGUF '", f.origin(), "': tensor '", g.empty() ? name : g, "' (", name, ") is missing");
    const QTypeInfo q = qtype_info(w.tensor->type);
    LA_CHECK(q.dequantizable, "GGUF '", f.origin(), "': tensor '", g, "' has type ", qtype_name(w.tensor->type),
             ", which this build cannot dequantize (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, "
             "Q5_K, Q6_K)");
    // A 1-D weight may be stored as [n]; others must match exactly.
    LA_CHECK(w.tensor->shape() == shape, "GGUF '", f.origin(), "': tensor '", g, "' has shape ",
             shape_str(w.tensor->shape()), " but the metadata implies ", shape_str(shape), " (", name, ")");
    if (permuted) {
      const bool q_rows = name.find("self_attn.q_proj") != std::string::npos;
      const bool k_rows = name.find("self_attn.k_proj") != std::string::npos;
      if (q_rows) w.unpermute_heads = c.heads;
      if (k_rows) w.unpermute_heads = c.kv_heads;
    }
    w.minus_one = gemma && name.size() > 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0;
    out.push_back(std::move(w));
  }
  return out;
}

void gguf_dequantize(const GgufWeight& w, float* out) {
  const GgufTensor& t = *w.tensor;
  const int64_t cols = t.ne[0], rows = t.numel() / cols;
  const QTypeInfo q = qtype_info(t.type);
  const size_t row_bytes = static_cast<size_t>(cols / q.block) * size_t(q.bytes);
  if (w.unpermute_heads <= 0) {
    for (int64_t r = 0; r < rows; ++r) dequantize_row(t.type, t.data + r * row_bytes, out + r * cols, cols);
  } else if (t.ne.size() == 1) {  // a q/k bias: its elements are the rows
    std::vector<float> v(static_cast<size_t>(cols));
    dequantize_row(t.type, t.data, v.data(), cols);
    const int64_t per_head = cols / w.unpermute_heads, half = per_head / 2;
    LA_CHECK(per_head * w.unpermute_heads == cols && half * 2 == per_head, "GGUF: tensor '", t.name, "' has ", cols,
             " elements, not a multiple of 2 x ", w.unpermute_heads, " heads");
    for (int64_t h = 0; h < w.unpermute_heads; ++h)
      for (int64_t i = 0; i < half; ++i)
        for (int j = 0; j < 2; ++j) out[h * per_head + j * half + i] = v[size_t(h * per_head + 2 * i + j)];
  } else {
    // The converter wrote row 2i + j (j = 0, 1) of each head from Hugging Face row j * half + i: read it back.
    const int64_t per_head = rows / w.unpermute_heads, half = per_head / 2;
    LA_CHECK(per_head * w.unpermute_heads == rows && half * 2 == per_head, "GGUF: tensor '", t.name, "' has ", rows,
             " rows, not a multiple of 2 x ", w.unpermute_heads, " heads");
    for (int64_t h = 0; h < w.unpermute_heads; ++h)
      for (int64_t i = 0; i < half; ++i)
        for (int j = 0; j < 2; ++j) {
          const int64_t src = h * per_head + 2 * i + j, dst = h * per_head + j * half + i;
          dequantize_row(t.type, t.data + src * row_bytes, out + dst * cols, cols);
        }
  }
  if (w.minus_one)
    for (int64_t i = 0; i < rows * cols; ++i) out[i] -= 1.0f;
}

std::vector<const uint8_t*> gguf_rows(const GgufWeight& w) {
  const GgufTensor& t = *w.tensor;
  const int64_t cols = t.ne[0], rows = t.numel() / cols;
  const QTypeInfo q = qtype_info(t.type);
  const size_t row_bytes = static_cast<size_t>(cols / q.block) * size_t(q.bytes);
  std::vector<const uint8_t*> out(static_cast<size_t>(rows));
  const int64_t per_head = w.unpermute_heads > 0 ? rows / w.unpermute_heads : rows, half = per_head / 2;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t src = r;
    if (w.unpermute_heads > 0) {  // HF row h * per_head + j * half + i is file row h * per_head + 2 i + j
      const int64_t h = r / per_head, rem = r % per_head, j = rem / half, i = rem % half;
      src = h * per_head + 2 * i + j;
    }
    out[static_cast<size_t>(r)] = t.data + src * row_bytes;
  }
  return out;
}

std::string gguf_weights_summary(const GgufFile& f) {
  static const std::map<int64_t, const char*> ftypes = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},   {32, "BF16"},
  };
  const GgufValue* ft = f.find("general.file_type");
  if (ft && ft->is_int())
    if (auto it = ftypes.find(ft->i); it != ftypes.end()) return it->second;
  std::map<std::string, int> count;
  for (const auto& t : f.tensors())
    if (t.ne.size() >= 2) ++count[qtype_name(t.type)];
  std::string s;
  for (const auto& [n, k] : count) s += (s.empty() ? "" : "+") + n;
  return s.empty() ? "F32" : s;
}

}  // namespace la
