// Weights: loading, random presets, fusion, Hugging Face names, checksum, saving (see torch_weights.h).
#include "torch_weights.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "lookahead/backend/cpu/cpu_forward.h"
#include "lookahead/model/quant.h"
#include "lookahead/model/gguf_model.h"
#include "lookahead/model/model_dir.h"
#include "lookahead/model/safetensors.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace la {
namespace {

at::ScalarType to_scalar(DType d) {
  switch (d) {
    case DType::F32: return at::kFloat;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
  }
  return at::kFloat;
}

void parse_random(const std::string& m, std::string& name, uint64_t& seed) {
  std::string rest = m.substr(7);
  seed = 0;
  auto colon = rest.find(':');
  name = rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string s = rest.substr(colon + 1);
    LA_CHECK(!s.empty() && s.find_first_not_of("0123456789") == std::string::npos, "random model '", m,
             "': seed '", s, "' is not a non-negative integer");
    seed = std::stoull(s);
  }
}

// Dummy weights at real shapes: matrices uniform with std 1/sqrt(fan_in) (so every layer changes the residual
// stream and greedy outputs are not just the input token), embeddings uniform(-1, 1), norms near 1.
std::map<std::string, at::Tensor> random_tensors(const ModelConfig& cfg, uint64_t seed) {
  std::map<std::string, at::Tensor> w;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  for (auto& [n, shape] : expected_tensors(cfg)) {
    at::Tensor t = at::empty(shape, f32);
    if (n.find("norm") != std::string::npos) {
      if (cfg.gemma_norms) t.uniform_(-0.2, 0.2, gen);  // Gemma scales by (1 + w)
      else t.uniform_(0.8, 1.2, gen);
    } else if (n.find(".bias") != std::string::npos) {
      t.uniform_(-0.1, 0.1, gen);
    } else if (n == "model.embed_tokens.weight") {
      t.uniform_(-1.0, 1.0, gen);
    } else {
      const double a = std::sqrt(3.0 / static_cast<double>(shape.back()));
      t.uniform_(-a, a, gen);
    }
    w[n] = t;
  }
  return w;
}

at::Tensor tensor_of(const SafetensorsCheckpoint& ck, const std::string& n) {
  const auto& v = ck.get(n);
  return at::from_blob(const_cast<void*>(v.data), v.shape, at::TensorOptions().dtype(to_scalar(v.dtype)));
}

std::map<std::string, at::Tensor> checkpoint_tensors(const std::string& dir, const ModelConfig& cfg) {
  auto ck = SafetensorsCheckpoint::open(dir);
  check_checkpoint(ck, cfg, dir);
  std::map<std::string, at::Tensor> w;
  for (auto& [n, shape] : expected_tensors(cfg)) w[n] = tensor_of(ck, n).clone();
  // Llama with attention_bias also has an o_proj bias (Qwen2 does not): optional.
  for (int l = 0; l < cfg.layers && cfg.attention_bias; ++l) {
    const std::string n = "model.layers." + std::to_string(l) + ".self_attn.o_proj.bias";
    if (!ck.has(n)) continue;
    LA_CHECK(ck.get(n).shape == std::vector<int64_t>{cfg.hidden}, dir, ": tensor '", n, "' has the wrong shape");
    w[n] = tensor_of(ck, n).clone();
  }
  return w;
}

// A GGUF file's weights, dequantized to fp32 then narrowed to `dt` one tensor at a time (src/model/gguf_model.cpp:
// names, q/k row order, Gemma norms). The names in `skip` (matrices the CPU kernels read quantized, with no float
// copy: keep_plan) become meta tensors of their shape and dtype, never dequantized.
std::map<std::string, at::Tensor> gguf_tensors(const GgufFile& f, const ModelConfig& cfg, at::ScalarType dt,
                                               const std::set<std::string>& skip) {
  std::map<std::string, at::Tensor> w;
  for (const GgufWeight& g : gguf_weights(f, cfg)) {
    if (skip.count(g.name)) {
      w[g.name] = at::empty(g.shape, at::TensorOptions().dtype(dt).device(at::kMeta));
      continue;
    }
    at::Tensor t = at::empty(g.shape, at::TensorOptions().dtype(at::kFloat));
    gguf_dequantize(g, t.data_ptr<float>());
    w[g.name] = dt == at::kFloat ? t : t.to(dt);
  }
  return w;
}

// One matrix the CPU kernels may read quantized: the fused tensor's parts (q|k|v, gate|up or one tensor).
struct KeepGroup {
  std::vector<std::string> parts;
};

// The groups in keep_quantized's order: the output head (the tied embedding's name when tied), then per layer
// qkv, o, gate|up, down.
std::vector<KeepGroup> keep_groups(const ModelConfig& c) {
  std::vector<KeepGroup> g;
  g.push_back({{c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"}});
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    if (c.fused_qkv) g.push_back({{p + "self_attn.qkv_proj.weight"}});
    else g.push_back({{p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"}});
    g.push_back({{p + "self_attn.o_proj.weight"}});
    if (c.fused_qkv) g.push_back({{p + "mlp.gate_up_proj.weight"}});
    else g.push_back({{p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}});
    g.push_back({{p + "mlp.down_proj.weight"}});
  }
  return g;
}

// The quantized rows of a group when the quantized GEMM can serve it: every part present, of one supported type,
// of one row length; else false (the matrix stays float).
bool quant_rows_of(const std::map<std::string, GgufWeight>& by_name, const KeepGroup& grp, QuantRows& q) {
  q = QuantRows{};
  for (const auto& n : grp.parts) {
    auto it = by_name.find(n);
    if (it == by_name.end() || !quant_gemm_supports(it->second.tensor->type)) return false;
    if (!q.rows.empty() && (it->second.tensor->type != q.type || it->second.tensor->ne[0] != q.cols)) return false;
    q.type = it->second.tensor->type;
    q.cols = static_cast<int>(it->second.tensor->ne[0]);
    const auto rows = gguf_rows(it->second);
    q.rows.insert(q.rows.end(), rows.begin(), rows.end());
  }
  return !q.rows.empty();
}

std::map<std::string, GgufWeight> weights_by_name(const GgufFile& f, const ModelConfig& c) {
  std::map<std::string, GgufWeight> by_name;
  for (GgufWeight& g : gguf_weights(f, c)) by_name[g.name] = g;
  return by_name;
}

// The GGUF tensors that need no float copy when only the CPU kernel forward runs: the parts of every matrix the
// quantized GEMM serves, and the embedding, whose rows the forward then dequantizes at lookup from the file's
// blocks (TorchWeights::embed_rows) -- unless it is the tied output head and that head stays float.
std::set<std::string> keep_plan(const GgufFile& f, const ModelConfig& c) {
  const auto by_name = weights_by_name(f, c);
  std::set<std::string> skip;
  bool head_kept = false;
  QuantRows q;
  const auto groups = keep_groups(c);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (!quant_rows_of(by_name, groups[i], q)) continue;
    if (i == 0) head_kept = true;
    skip.insert(groups[i].parts.begin(), groups[i].parts.end());
  }
  if (c.tie_word_embeddings && !head_kept) skip.erase("model.embed_tokens.weight");
  else skip.insert("model.embed_tokens.weight");
  return skip;
}

// The GGUF matrices the CPU kernels can read quantized (gemm_quant.h), keyed by the fused float tensor each stands
// for: q|k|v and gate|up concatenate rows of the file's tensors when they share one type; a matrix whose parts
// differ in type (Gemma-3's Q5_0 q/k with a Q8_0 v) or whose type the quantized GEMM lacks stays float. The
// tensors keep_plan left undequantized are meta tensors here (TorchWeights::floats_dropped), the embedding's rows
// then come from the file (embed_rows).
void keep_quantized(TorchWeights& W, std::shared_ptr<const GgufFile> f) {
  const auto by_name = weights_by_name(*f, W.cfg);
  std::map<std::string, int> kept;
  int total = 0;
  const ModelConfig c = W.cfg;
  const auto groups = keep_groups(c);
  auto keep = [&](at::Tensor& t, const KeepGroup& grp) {
    ++total;
    QuantRows q;
    if (!quant_rows_of(by_name, grp, q) || int64_t(q.rows.size()) != t.size(0) || q.cols != t.size(1)) {
      LA_CHECK(!t.is_meta(), "internal: GGUF matrix ", grp.parts.front(), " has neither a float copy nor quantized rows");
      return;
    }
    ++kept[qtype_name(q.type)];
    if (t.is_meta()) W.floats_dropped = true;  // no float copy: weights_checksum covers the quantized bytes
    W.quant[quant_key(t)] = std::move(q);
  };
  size_t gi = 0;
  keep(c.tie_word_embeddings ? W.embed : W.lm_head, groups[gi++]);
  for (int l = 0; l < c.layers; ++l) {
    LayerW& L = W.layers[l];
    keep(L.wqkv, groups[gi++]);
    keep(L.wo, groups[gi++]);
    keep(L.wgu, groups[gi++]);
    keep(L.wd, groups[gi++]);
  }
  if (W.embed.is_meta()) {  // the forward dequantizes its rows at lookup
    const GgufWeight& e = by_name.at("model.embed_tokens.weight");
    auto rows = std::make_shared<QuantRows>();
    rows->type = e.tensor->type;
    rows->cols = static_cast<int>(e.tensor->ne[0]);
    rows->rows = gguf_rows(e);
    W.embed_rows = rows;
    W.floats_dropped = true;
  }
  int n = 0;
  std::string types;
  for (const auto& [t, k] : kept) n += k, types += (types.empty() ? "" : "+") + t;
  if (n > 0 || W.embed_rows) W.quant_source = f;
  if (n > 0) W.quant_note = types + " kept quantized (" + std::to_string(n) + " of " + std::to_string(total) + " matrices)";
}

// With no float copy of the kept matrices (floats_dropped): the other matrices' GEMM panels, made here, replace
// their float tensors (by meta tensors, in `unfused` too), the tied embedding excepted (its rows are looked up).
void pack_float_matrices(TorchWeights& W) {
  auto pack = [&](at::Tensor& t) {
    if (t.is_meta() || t.is_same(W.embed) || !t.is_contiguous() || t.dim() != 2) return;
    const WType wt = t.scalar_type() == at::kHalf ? WType::F16 : t.scalar_type() == at::kBFloat16 ? WType::BF16
                                                                                                   : WType::F32;
    PackedWeight p = pack_weight(WeightView{t.data_ptr(), wt, int(t.size(0)), int(t.size(1))});
    const void* old = t.data_ptr();
    const at::Tensor shape_only = at::empty(t.sizes(), t.options().device(at::kMeta));
    for (auto& [n, u] : W.unfused)
      if (u.defined() && !u.is_meta() && u.data_ptr() == old) u = shape_only;
    t = shape_only;
    W.packed[quant_key(t)] = std::move(p);
  };
  pack(W.lm_head);
  for (LayerW& L : W.layers)
    for (at::Tensor* t : {&L.wqkv, &L.wo, &L.wgu, &L.wd}) pack(*t);
}

// Fuses q/k/v and gate/up per layer and drops the separate tensors (one copy of every weight in memory).
void fuse(TorchWeights& W) {
  auto& named = W.unfused;
  auto get = [&](const std::string& n) -> at::Tensor {
    auto it = named.find(n);
    LA_CHECK(it != named.end(), "internal: weight '", n, "' missing");
    return it->second;
  };
  const ModelConfig& c = W.cfg;
  W.embed = get("model.embed_tokens.weight");
  W.norm = get("model.norm.weight");
  W.lm_head = c.tie_word_embeddings ? W.embed : get("lm_head.weight");
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerW L;
    L.ln1 = get(p + "input_layernorm.weight");
    L.ln2 = get(p + "post_attention_layernorm.weight");
    // Phi-3's checkpoint holds them fused already (q|k|v, gate|up, in this order): kept under their own names.
    L.wqkv = c.fused_qkv ? get(p + "self_attn.qkv_proj.weight").contiguous()
                         : at::cat({get(p + "self_attn.q_proj.weight"), get(p + "self_attn.k_proj.weight"),
                                    get(p + "self_attn.v_proj.weight")}, 0).contiguous();
    if (c.attention_bias)
      L.bqkv = at::cat({get(p + "self_attn.q_proj.bias"), get(p + "self_attn.k_proj.bias"),
                        get(p + "self_attn.v_proj.bias")}, 0).contiguous();
    L.wo = get(p + "self_attn.o_proj.weight");
    if (named.count(p + "self_attn.o_proj.bias")) L.bo = named[p + "self_attn.o_proj.bias"];
    L.wgu = c.fused_qkv ? get(p + "mlp.gate_up_proj.weight").contiguous()
                        : at::cat({get(p + "mlp.gate_proj.weight"), get(p + "mlp.up_proj.weight")}, 0).contiguous();
    if (c.fused_qkv) {  // the map keeps the tensors the layer uses (contiguous() may have copied)
      named[p + "self_attn.qkv_proj.weight"] = L.wqkv;
      named[p + "mlp.gate_up_proj.weight"] = L.wgu;
    }
    L.wd = get(p + "mlp.down_proj.weight");
    if (c.qk_norm) {
      L.qn = get(p + "self_attn.q_norm.weight");
      L.kn = get(p + "self_attn.k_norm.weight");
    }
    if (c.sandwich_norms) {
      L.ln_pre_ff = get(p + "pre_feedforward_layernorm.weight");
      L.ln_post_ff = get(p + "post_feedforward_layernorm.weight");
    }
    W.layers.push_back(std::move(L));
    for (auto n : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                   "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias", "mlp.gate_proj.weight",
                   "mlp.up_proj.weight"})
      named.erase(p + n);
  }
}

}  // namespace

at::ScalarType parse_dtype(const std::string& s) {
  switch (parse_dtype_name(s)) {
    case WType::F16: return at::kHalf;
    case WType::BF16: return at::kBFloat16;
    case WType::F32: break;
  }
  return at::kFloat;
}

bool is_random_model(const std::string& m) { return m.rfind("random:", 0) == 0; }

ModelConfig model_config_of(const std::string& model) {
  if (is_random_model(model)) {
    std::string name;
    uint64_t seed;
    parse_random(model, name, seed);
    return preset_config(name);
  }
  return load_model_config(model);
}

std::shared_ptr<const TorchWeights> load_weights(const LoadOptions& o, at::Device dev, at::ScalarType dt) {
  c10::InferenceMode ng;
  auto W = std::make_shared<TorchWeights>();
  W->dtype = dt;
  W->device = dev;
  std::map<std::string, at::Tensor> w;
  std::shared_ptr<const GgufFile> gguf;
  bool drop = false;
  // GGUF on the CPU: the kernels read the quantized blocks (LOOKAHEAD_GGUF_QUANT=dequant: the float copies).
  const char* qenv = std::getenv("LOOKAHEAD_GGUF_QUANT");
  const std::string qmode = qenv && *qenv ? qenv : "keep";
  LA_CHECK(qmode == "keep" || qmode == "dequant", "invalid LOOKAHEAD_GGUF_QUANT '", qmode, "' (expected keep or dequant)");
  if (is_random_model(o.model)) {
    std::string name;
    uint64_t seed;
    parse_random(o.model, name, seed);
    W->cfg = preset_config(name);
    w = random_tensors(W->cfg, seed);
  } else {
    W->cfg = load_model_config(o.model);
    if (is_gguf_path(o.model)) {
      gguf = std::make_shared<const GgufFile>(GgufFile::open(o.model));
      // The float copies of the matrices kept quantized (and of the embedding) are never made when only the CPU
      // kernel forward will run: --kernels on, no --selfcheck (its ATen reference needs them; as do bench-forward
      // --kernels both and LOOKAHEAD_GGUF_QUANT=dequant).
      drop = dev.is_cpu() && qmode == "keep" && o.kernels == "on" && !o.keep_float_weights &&
             (o.selfcheck.empty() || o.selfcheck == "off") && CpuForward::unsupported_reason(W->cfg).empty();
      w = gguf_tensors(*gguf, W->cfg, dt, drop ? keep_plan(*gguf, W->cfg) : std::set<std::string>{});
    } else {
      w = checkpoint_tensors(o.model, W->cfg);
    }
  }
  // --max-context: the context (and so the KV cache's largest size) below the model's own limit.
  LA_CHECK(o.max_context >= 0, "invalid --max-context ", o.max_context, " (expected a token count, 0: the model's)");
  if (o.max_context > 0) W->cfg.max_positions = std::min(W->cfg.max_positions, o.max_context);
  for (auto& [n, t] : w) W->unfused[n] = t.is_meta() ? t : t.to(dev, dt);
  w.clear();
  fuse(*W);
  if (gguf && dev.is_cpu() && qmode == "keep") keep_quantized(*W, gguf);
  if (W->floats_dropped) pack_float_matrices(*W);
  if (gguf) gguf->release_pages();  // what dequantization read: the kernels' panels are copies
  return W;
}

std::map<std::string, at::Tensor> hf_named(const TorchWeights& w) {
  std::map<std::string, at::Tensor> out = w.unfused;
  const ModelConfig& c = w.cfg;
  const int64_t Q = int64_t(c.heads) * c.head_dim, KV = int64_t(c.kv_heads) * c.head_dim;
  for (int l = 0; l < c.layers && !c.fused_qkv; ++l) {  // Phi-3's fused tensors are stored under their own names
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const auto& L = w.layers[l];
    out[p + "self_attn.q_proj.weight"] = L.wqkv.narrow(0, 0, Q);
    out[p + "self_attn.k_proj.weight"] = L.wqkv.narrow(0, Q, KV);
    out[p + "self_attn.v_proj.weight"] = L.wqkv.narrow(0, Q + KV, KV);
    if (L.bqkv.defined()) {
      out[p + "self_attn.q_proj.bias"] = L.bqkv.narrow(0, 0, Q);
      out[p + "self_attn.k_proj.bias"] = L.bqkv.narrow(0, Q, KV);
      out[p + "self_attn.v_proj.bias"] = L.bqkv.narrow(0, Q + KV, KV);
    }
    out[p + "mlp.gate_proj.weight"] = L.wgu.narrow(0, 0, c.intermediate);
    out[p + "mlp.up_proj.weight"] = L.wgu.narrow(0, c.intermediate, c.intermediate);
  }
  return out;
}

// Exact and order-independent per tensor, so ranks on CPU and on GPUs agree bit for bit: int64 sums of the raw
// bit patterns, plus a position-weighted sum (catches permuted rows). Computed on the tensor's device in chunks
// of at most kChunk elements (never a double-precision copy of a whole tensor). Only multi-rank runs call it.
uint64_t weights_checksum(const TorchWeights& w) {
  constexpr int64_t kChunk = int64_t(1) << 22;
  c10::InferenceMode ng;
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
  for (auto& [name, t] : hf_named(w)) {
    for (char ch : name) mix(static_cast<uint8_t>(ch));
    for (auto s : t.sizes()) mix(static_cast<uint64_t>(s));
    if (t.is_meta()) continue;  // no float copy: its quantized bytes are hashed below
    const at::Tensor flat = t.contiguous().view(-1);
    const at::Tensor bits = flat.view(t.element_size() == 4 ? at::kInt : at::kShort);
    uint64_t s1 = 0, s2 = 0;  // wrap around on purpose
    for (int64_t off = 0; off < bits.numel(); off += kChunk) {
      const int64_t n = std::min(kChunk, bits.numel() - off);
      const at::Tensor b = bits.narrow(0, off, n).to(at::kLong);
      const at::Tensor wgt = at::arange(off, off + n, b.options()).remainder_(251).add_(1);
      s1 += static_cast<uint64_t>(b.sum().item<int64_t>());
      s2 += static_cast<uint64_t>(b.mul(wgt).sum().item<int64_t>());
    }
    mix(s1);
    mix(s2);
  }
  if (w.floats_dropped) {  // the quantized bytes of the matrices without a float copy (read here, not at load:
    // hashing at load would make the whole file resident), in a fixed order, 8 bytes at a time
    auto mix_rows = [&](const at::Tensor& t) {
      if (!t.is_meta()) return;
      const auto it = w.quant.find(quant_key(t));
      if (it == w.quant.end()) return;
      const QuantRows& q = it->second;
      const QTypeInfo info = qtype_info(q.type);
      const size_t row_bytes = size_t(q.cols / info.block) * info.bytes;
      for (const uint8_t* r : q.rows)
        for (size_t i = 0; i < row_bytes; i += 8) {
          uint64_t v = 0;
          std::memcpy(&v, r + i, std::min<size_t>(8, row_bytes - i));
          mix(v);
        }
      if (w.quant_source) w.quant_source->release_pages();
    };
    auto mix_panels = [&](const at::Tensor& t) {  // a float matrix packed at load: its panels' bytes
      const auto it = t.is_meta() ? w.packed.find(quant_key(t)) : w.packed.end();
      if (it == w.packed.end()) return;
      const auto* b = static_cast<const uint8_t*>(it->second.data);
      for (size_t i = 0; i < it->second.bytes; i += 8) {
        uint64_t v = 0;
        std::memcpy(&v, b + i, std::min<size_t>(8, it->second.bytes - i));
        mix(v);
      }
    };
    mix_rows(w.lm_head);
    mix_panels(w.lm_head);
    for (const LayerW& L : w.layers)
      for (const at::Tensor* t : {&L.wqkv, &L.wo, &L.wgu, &L.wd}) mix_rows(*t), mix_panels(*t);
    if (w.embed_rows) {
      const QTypeInfo info = qtype_info(w.embed_rows->type);
      const size_t row_bytes = size_t(w.embed_rows->cols / info.block) * info.bytes;
      if (!(w.cfg.tie_word_embeddings && w.quant.count(quant_key(w.embed))))  // else hashed as lm_head
        for (const uint8_t* r : w.embed_rows->rows)
          for (size_t i = 0; i < row_bytes; i += 8) {
            uint64_t v = 0;
            std::memcpy(&v, r + i, std::min<size_t>(8, row_bytes - i));
            mix(v);
          }
      if (w.quant_source) w.quant_source->release_pages();
    }
  }
  return h;
}

void save_weights_hf(const TorchWeights& w, const std::string& dir) {
  LA_CHECK(!w.floats_dropped, "save: the GGUF's matrices were kept quantized without float copies (set "
           "LOOKAHEAD_GGUF_QUANT=dequant to save it)");
  const auto& c = w.cfg;
  nlohmann::json cfg = {{"architectures", {c.architecture}},
                        {"model_type", c.model_type},
                        {"hidden_size", c.hidden},
                        {"intermediate_size", c.intermediate},
                        {"num_hidden_layers", c.layers},
                        {"num_attention_heads", c.heads},
                        {"num_key_value_heads", c.kv_heads},
                        {"head_dim", c.head_dim},
                        {"vocab_size", c.vocab},
                        {"max_position_embeddings", c.max_positions},
                        {"rms_norm_eps", c.rms_eps},
                        {"rope_theta", c.rope_theta},
                        {"attention_bias", c.attention_bias},
                        {"mlp_bias", false},
                        {"hidden_act", c.hidden_act},
                        {"tie_word_embeddings", c.tie_word_embeddings},
                        {"bos_token_id", c.bos_id},
                        {"pad_token_id", nullptr},  // not used; else Phi3Config defaults it to 32000, past small vocabularies
                        {"eos_token_id", c.eos_ids.size() == 1 ? nlohmann::json(c.eos_ids[0]) : nlohmann::json(c.eos_ids)},
                        {"torch_dtype", "float32"}};
  if (!c.rope_scaling.type.empty())
    cfg["rope_scaling"] = {{"rope_type", c.rope_scaling.type},
                           {"factor", c.rope_scaling.factor},
                           {"low_freq_factor", c.rope_scaling.low_freq_factor},
                           {"high_freq_factor", c.rope_scaling.high_freq_factor},
                           {"original_max_position_embeddings", c.rope_scaling.original_max_position}};
  else
    cfg["rope_scaling"] = nullptr;
  // The features beyond Llama, in the fields transformers reads (so that transformers loads the same model).
  if (c.rotary() != c.head_dim) cfg["partial_rotary_factor"] = static_cast<double>(c.rotary()) / c.head_dim;
  const bool gemma = c.architecture == "Gemma2ForCausalLM" || c.architecture == "Gemma3ForCausalLM";
  if (gemma) {
    cfg["hidden_activation"] = c.hidden_act;
    const double q = c.query_pre_attn_scalar;  // transformers' config wants an int here (256)
    cfg["query_pre_attn_scalar"] = q == std::floor(q) ? nlohmann::json(static_cast<int64_t>(q)) : nlohmann::json(q);
    cfg["attn_logit_softcapping"] = c.attn_softcap > 0 ? nlohmann::json(c.attn_softcap) : nlohmann::json(nullptr);
    cfg["final_logit_softcapping"] = c.final_softcap > 0 ? nlohmann::json(c.final_softcap) : nlohmann::json(nullptr);
    if (c.local_rope_theta > 0) cfg["rope_local_base_freq"] = c.local_rope_theta;
  }
  if (c.any_sliding()) {
    cfg["sliding_window"] = c.sliding_window;
    cfg["use_sliding_window"] = true;  // Qwen2/3 read the window only with this
    nlohmann::json types = nlohmann::json::array();
    for (int l = 0; l < c.layers; ++l) types.push_back(c.is_sliding(l) ? "sliding_attention" : "full_attention");
    // Mistral and Phi-3 window every layer and have no layer_types (transformers warns about one).
    if (c.architecture != "MistralForCausalLM" && c.architecture != "Phi3ForCausalLM") cfg["layer_types"] = types;
  } else {
    cfg["sliding_window"] = nullptr;
  }
  const ModelDir out(dir);
  out.write_config(cfg, c);
  // safetensors, F32
  nlohmann::json header = nlohmann::json::object();
  std::string body;
  for (auto& [n, t] : hf_named(w)) {
    at::Tensor f = t.to(at::kFloat).cpu().contiguous();
    const size_t off = body.size();
    body.append(reinterpret_cast<const char*>(f.data_ptr<float>()), f.numel() * 4);
    header[n] = {{"dtype", "F32"}, {"shape", f.sizes().vec()}, {"data_offsets", {off, body.size()}}};
  }
  std::string hs = header.dump();
  while ((hs.size() + 8) % 8) hs += ' ';
  uint64_t hl = hs.size();
  std::string file(reinterpret_cast<const char*>(&hl), 8);
  file += hs;
  file += body;
  write_file_atomic(dir + "/model.safetensors", file);
}

}  // namespace la
