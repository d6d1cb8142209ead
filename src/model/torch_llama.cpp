// The Llama forward over a step (libtorch/ATen). The only translation unit of the model that includes ATen.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>

#include "cuda_forward.h"
#include "lookahead/model/cpu_gemm.h"
#include "lookahead/model/llama.h"
#include "lookahead/model/safetensors.h"
#include "lookahead/model/selfcheck.h"
#include "lookahead/model/step_layout.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

#ifdef LOOKAHEAD_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace la {
namespace {

at::ScalarType parse_dtype(const std::string& s) {
  if (s == "fp32" || s == "float32") return at::kFloat;
  if (s == "fp16" || s == "float16") return at::kHalf;
  if (s == "bf16" || s == "bfloat16") return at::kBFloat16;
  fail("invalid --dtype '", s, "' (expected fp32, fp16 or bf16)");
}

at::ScalarType to_scalar(DType d) {
  switch (d) {
    case DType::F32: return at::kFloat;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
  }
  return at::kFloat;
}

class TorchLlama final : public StepModel {
 public:
  TorchLlama(const ModelConfig& c, at::Device dev, at::ScalarType dt, std::string desc, bool kernels = false,
             bool graphs = false)
      : cfg_(c), dev_(dev), dt_(dt), desc_(std::move(desc)), kernels_(kernels), graphs_(graphs) {}

  const ModelConfig& config() const override { return cfg_; }
  int cache_len() const override { return len_; }
  std::string describe() const override {
    std::string note = kernel_note_;
    if (!selfcheck_note_.empty()) note += (note.empty() ? "" : ", ") + selfcheck_note_;
    return note.empty() ? desc_ : desc_.substr(0, desc_.size() - 1) + ", " + note + "]";
  }
  // The self-check's summary, shown in describe() (apply_selfcheck).
  void set_selfcheck_note(std::string s) { selfcheck_note_ = std::move(s); }
  // Whether a fast path (CUDA kernels, CPU skinny GEMM) would serve, i.e. whether a self-check has anything to check.
  bool has_fast_path() const { return static_cast<bool>(cf_) || cpu_gemm_; }
  bool uses_graphs() const { return dev_.is_cuda() && graphs_; }

  // ---- weights -------------------------------------------------------------------------------------------
  void set_weights(std::map<std::string, at::Tensor> w) {
    named_ = std::move(w);
    auto get = [&](const std::string& n) -> at::Tensor {
      auto it = named_.find(n);
      LA_CHECK(it != named_.end(), "internal: weight '", n, "' missing");
      return it->second;
    };
    embed_ = get("model.embed_tokens.weight");
    norm_ = get("model.norm.weight");
    lm_head_ = cfg_.tie_word_embeddings ? embed_ : get("lm_head.weight");
    layers_.clear();
    for (int l = 0; l < cfg_.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      LayerW L;
      L.ln1 = get(p + "input_layernorm.weight");
      L.ln2 = get(p + "post_attention_layernorm.weight");
      L.wqkv = at::cat({get(p + "self_attn.q_proj.weight"), get(p + "self_attn.k_proj.weight"),
                        get(p + "self_attn.v_proj.weight")}, 0).contiguous();
      if (cfg_.attention_bias)
        L.bqkv = at::cat({get(p + "self_attn.q_proj.bias"), get(p + "self_attn.k_proj.bias"),
                          get(p + "self_attn.v_proj.bias")}, 0).contiguous();
      L.wo = get(p + "self_attn.o_proj.weight");
      if (named_.count(p + "self_attn.o_proj.bias")) L.bo = named_[p + "self_attn.o_proj.bias"];
      L.wgu = at::cat({get(p + "mlp.gate_proj.weight"), get(p + "mlp.up_proj.weight")}, 0).contiguous();
      L.wd = get(p + "mlp.down_proj.weight");
      layers_.push_back(std::move(L));
    }
    // The fused copies replace the separate q/k/v and gate/up tensors: drop those (one copy of the weights in
    // memory); named() rebuilds them as views of the fused tensors when saving.
    for (int l = 0; l < cfg_.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      for (auto n : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                     "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias", "mlp.gate_proj.weight",
                     "mlp.up_proj.weight"})
        named_.erase(p + n);
    }
    init_rope();
    // The KV cache starts at what short requests need and doubles on demand up to the context (+256 rows of step
    // slack): a 131k-context model does not reserve its whole context (17 GiB for Llama-3-8B) before the first token.
    alloc_cache(std::min(cfg_.max_positions, 4096) + 256);
    make_cuda_forward();
    make_cpu_gemm();
  }

  // The skinny GEMM for small fp32 CPU steps (--kernels on; off = ATen's linear only).
  void make_cpu_gemm() {
    const bool wanted = dev_.is_cpu() && dt_ == at::kFloat && kernels_;
    cpu_gemm_ = wanted && cpu_gemm_supported();
    if (wanted) kernel_note_ = cpu_gemm_ ? "skinny gemm" : "no AVX2: ATen gemm";
  }

  // The kernel forward for CUDA models with --kernels on (when the shapes allow; else the ATen forward serves).
  void make_cuda_forward() {
    cf_.reset();
    kernel_note_.clear();
#ifdef LOOKAHEAD_WITH_CUDA
    if (!dev_.is_cuda() || !kernels_) return;
    const std::string why = CudaForward::unsupported_reason(cfg_, dt_);
    if (!why.empty()) {
      kernel_note_ = "kernels off: " + why;
      return;
    }
    CudaModelRefs r;
    r.cfg = &cfg_;
    r.dtype = dt_;
    r.embed = embed_;
    r.norm = norm_;
    r.lm_head = lm_head_;
    r.inv_freq = inv_freq_;
    r.layers = &layers_;
    r.kc = &kc_;
    r.vc = &vc_;
    cf_ = std::make_shared<CudaForward>(r, graphs_);
    kernel_note_ = graphs_ ? "kernels, graphs" : "kernels";
#endif
  }

  // Every weight under its Hugging Face name (q/k/v and gate/up as views of the fused tensors).
  std::map<std::string, at::Tensor> named() const {
    std::map<std::string, at::Tensor> out = named_;
    const int64_t Q = int64_t(cfg_.heads) * cfg_.head_dim, KV = int64_t(cfg_.kv_heads) * cfg_.head_dim;
    for (int l = 0; l < cfg_.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const auto& L = layers_[l];
      out[p + "self_attn.q_proj.weight"] = L.wqkv.narrow(0, 0, Q);
      out[p + "self_attn.k_proj.weight"] = L.wqkv.narrow(0, Q, KV);
      out[p + "self_attn.v_proj.weight"] = L.wqkv.narrow(0, Q + KV, KV);
      if (L.bqkv.defined()) {
        out[p + "self_attn.q_proj.bias"] = L.bqkv.narrow(0, 0, Q);
        out[p + "self_attn.k_proj.bias"] = L.bqkv.narrow(0, Q, KV);
        out[p + "self_attn.v_proj.bias"] = L.bqkv.narrow(0, Q + KV, KV);
      }
      out[p + "mlp.gate_proj.weight"] = L.wgu.narrow(0, 0, cfg_.intermediate);
      out[p + "mlp.up_proj.weight"] = L.wgu.narrow(0, cfg_.intermediate, cfg_.intermediate);
    }
    return out;
  }

  // Tensor copies share storage: the weights (and rope tables) are shared, only the cache is new.
  std::unique_ptr<StepModel> fork() const override { return fork_with(kernels_, graphs_); }

  // A fork whose CUDA forward uses (or not) the kernels and graphs: compares both paths on one set of weights.
  std::unique_ptr<TorchLlama> fork_with(bool kernels, bool graphs) const {
    auto m = std::make_unique<TorchLlama>(*this);
    m->kernels_ = kernels;
    m->graphs_ = graphs;
    m->cf_.reset();  // the copy must not share this model's step buffers, graphs or cache table
    m->len_ = 0;
    m->step_len_ = 0;
    m->alloc_cache(cap_);
    m->make_cuda_forward();
    m->make_cpu_gemm();
    return m;
  }

  // Exact and order-independent per tensor, so ranks on CPU and on GPUs agree bit for bit: int64 sums of the raw
  // bit patterns, plus a position-weighted sum (catches permuted rows). Computed on the tensor's device in chunks
  // of at most kChunk elements (never a double-precision copy of a whole tensor). Only multi-rank runs call it.
  uint64_t checksum() const override {
    constexpr int64_t kChunk = int64_t(1) << 22;
    c10::InferenceMode ng;
    uint64_t h = 1469598103934665603ULL;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
    for (auto& [name, t] : named()) {
      for (char ch : name) mix(static_cast<uint8_t>(ch));
      for (auto s : t.sizes()) mix(static_cast<uint64_t>(s));
      const at::Tensor flat = t.contiguous().view(-1);
      const at::Tensor bits = flat.view(t.element_size() == 4 ? at::kInt : at::kShort);
      uint64_t s1 = 0, s2 = 0;  // wrap around on purpose
      for (int64_t off = 0; off < bits.numel(); off += kChunk) {
        const int64_t n = std::min(kChunk, bits.numel() - off);
        const at::Tensor b = bits.narrow(0, off, n).to(at::kLong);
        const at::Tensor w = at::arange(off, off + n, b.options()).remainder_(251).add_(1);
        s1 += static_cast<uint64_t>(b.sum().item<int64_t>());
        s2 += static_cast<uint64_t>(b.mul(w).sum().item<int64_t>());
      }
      mix(s1);
      mix(s2);
    }
    return h;
  }

  // ---- step forward --------------------------------------------------------------------------------------
  std::vector<int32_t> forward(const StepInput& in, const SampleParams& sp, std::vector<float>* logits_out) override {
    const int T = static_cast<int>(in.tokens.size());
    LA_CHECK(T > 0, "forward: empty step");
    LA_CHECK(in.positions.size() == in.tokens.size() && in.parents.size() == in.tokens.size(),
             "forward: tokens, positions and parents differ in length");
    for (int i = 0; i < T; ++i) {
      LA_CHECK(in.tokens[i] >= 0 && in.tokens[i] < cfg_.vocab, "forward: token id ", in.tokens[i],
               " outside the vocabulary (", cfg_.vocab, ")");
      LA_CHECK(in.positions[i] >= 0 && in.positions[i] < cfg_.max_positions, "forward: position ", in.positions[i],
               " outside [0, ", cfg_.max_positions, ")");
      LA_CHECK(in.parents[i] >= -1 && in.parents[i] < i, "forward: token ", i, " has invalid parent ", in.parents[i]);
    }
    const int L = len_;
    if (L + T > cap_) alloc_cache(grown_capacity(L + T), /*keep=*/L);
    c10::InferenceMode ng;
#ifdef LOOKAHEAD_WITH_CUDA
    if (cf_ && T <= CudaForward::kMaxRows) {
      const int R = step_bucket(T);  // padding rows write K/V past the step too
      if (L + R > cap_) alloc_cache(grown_capacity(L + R), /*keep=*/L);
      cf_->run(in, L, cap_);
      step_len_ = T;
      if (sp.greedy() && !logits_out) return cf_->argmax_to_host(T);
      at::Tensor logits = cf_->logits(T).to(at::kFloat);
      std::vector<int32_t> out = sp.greedy() ? cf_->argmax_to_host(T) : to_host_ids(sample(logits, in.positions, sp));
      if (logits_out) copy_logits(logits, logits_out);
      return out;
    }
#endif
    auto i64 = at::TensorOptions().dtype(at::kLong);
    std::vector<int64_t> ids(in.tokens.begin(), in.tokens.end()), pos(in.positions.begin(), in.positions.end());
    at::Tensor tid = at::from_blob(ids.data(), {T}, i64).to(dev_);
    at::Tensor tpos = at::from_blob(pos.data(), {T}, i64).to(dev_);

    // Mask over [cache | step]: the cache is fully visible; among step tokens only ancestors (and self).
    at::Tensor mask;
    const int S = L + T;
    {
      std::vector<float> m(static_cast<size_t>(T) * T, -INFINITY);
      for (int i = 0; i < T; ++i)
        for (int a = i; a >= 0; a = in.parents[a]) m[static_cast<size_t>(i) * T + a] = 0.f;
      if (T > 1) {
        at::Tensor tt = at::from_blob(m.data(), {T, T}, at::TensorOptions().dtype(at::kFloat)).to(dev_);
        mask = at::zeros({T, S}, at::TensorOptions().dtype(at::kFloat).device(dev_));
        mask.narrow(1, L, T).copy_(tt);
      }
    }

    const int Hq = cfg_.heads, Hkv = cfg_.kv_heads, D = cfg_.head_dim, g = Hq / Hkv;
    const int64_t Q = int64_t(Hq) * D, KV = int64_t(Hkv) * D;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    at::Tensor cos = cos_.index_select(0, tpos).to(dt_).view({T, 1, D});
    at::Tensor sin = sin_.index_select(0, tpos).to(dt_).view({T, 1, D});
    at::Tensor x = embed_.index_select(0, tid);
    for (int l = 0; l < cfg_.layers; ++l) {
      const auto& W = layers_[l];
      at::Tensor h = rms_norm(x, W.ln1);
      at::Tensor qkv = linear(h, W.wqkv, W.bqkv);
      at::Tensor q = rope(qkv.narrow(1, 0, Q).view({T, Hq, D}), cos, sin);
      at::Tensor k = rope(qkv.narrow(1, Q, KV).view({T, Hkv, D}), cos, sin);
      at::Tensor v = qkv.narrow(1, Q + KV, KV).view({T, Hkv, D});
      kc_[l].narrow(0, L, T).copy_(k);
      vc_[l].narrow(0, L, T).copy_(v);
      at::Tensor K = kc_[l].narrow(0, 0, S);  // [S, Hkv, D]
      at::Tensor V = vc_[l].narrow(0, 0, S);
      at::Tensor qh = q.view({T, Hkv, g, D}).permute({1, 2, 0, 3}).reshape({Hkv, g * T, D});
      at::Tensor sc = at::bmm(qh, K.permute({1, 2, 0})).to(at::kFloat).mul_(scale);  // [Hkv, g*T, S]
      if (mask.defined()) sc = sc.view({Hkv, g, T, S}).add_(mask).view({Hkv, g * T, S});
      at::Tensor p = at::softmax(sc, -1).to(dt_);
      at::Tensor o = at::bmm(p, V.permute({1, 0, 2}));  // [Hkv, g*T, D]
      o = o.view({Hkv, g, T, D}).permute({2, 0, 1, 3}).reshape({T, Q});
      x = x + linear(o, W.wo, W.bo);
      h = rms_norm(x, W.ln2);
      at::Tensor gu = linear(h, W.wgu);
      const int64_t I = cfg_.intermediate;
      x = x + linear(at::silu(gu.narrow(1, 0, I)) * gu.narrow(1, I, I), W.wd);
    }
    x = rms_norm(x, norm_);
    at::Tensor logits = linear(x, lm_head_).to(at::kFloat);  // [T, V]
    step_len_ = T;

    at::Tensor next;
    if (sp.greedy()) {
      next = logits.argmax(-1);
    } else {
      next = sample(logits, in.positions, sp);
    }
    std::vector<int32_t> out = to_host_ids(next);
    if (logits_out) copy_logits(logits, logits_out);
    return out;
  }

  static std::vector<int32_t> to_host_ids(const at::Tensor& next) {
    at::Tensor nc = next.to(at::kInt).cpu().contiguous();
    return std::vector<int32_t>(nc.data_ptr<int32_t>(), nc.data_ptr<int32_t>() + nc.numel());
  }
  static void copy_logits(const at::Tensor& logits, std::vector<float>* out) {
    at::Tensor lc = logits.cpu().contiguous();
    out->assign(lc.data_ptr<float>(), lc.data_ptr<float>() + lc.numel());
  }

  void commit(const std::vector<int32_t>& idx) override {
    if (idx.empty()) return;
    const int m = static_cast<int>(idx.size());
    for (auto i : idx) LA_CHECK(i >= 0 && i < step_len_, "commit: index ", i, " outside the last step (", step_len_, ")");
    LA_CHECK(len_ + m <= cfg_.max_positions, "commit: cache would exceed max positions");
    c10::InferenceMode ng;
    bool identity = true;
    for (int j = 0; j < m; ++j) identity = identity && idx[j] == j;
#ifdef LOOKAHEAD_WITH_CUDA
    bool path_order = true;  // the commit kernel copies in place: needs idx strictly increasing with idx[j] >= j
    for (int j = 0; j < m; ++j) path_order = path_order && idx[j] >= j && (j == 0 || idx[j] > idx[j - 1]);
    if (!identity && path_order && cf_ && m <= CudaForward::kMaxRows) {  // one kernel for all layers, no allocation
      cf_->commit(idx, len_);
      identity = true;
    }
#endif
    if (!identity) {
      std::vector<int64_t> rows(idx.begin(), idx.end());
      for (auto& r : rows) r += len_;
      at::Tensor ri = at::from_blob(rows.data(), {m}, at::TensorOptions().dtype(at::kLong)).to(dev_);
      for (int l = 0; l < cfg_.layers; ++l) {
        at::Tensor kk = kc_[l].index_select(0, ri), vv = vc_[l].index_select(0, ri);
        kc_[l].narrow(0, len_, m).copy_(kk);
        vc_[l].narrow(0, len_, m).copy_(vv);
      }
    }
    len_ += m;
    step_len_ = 0;
  }

  void truncate(int len) override {
    LA_CHECK(len >= 0 && len <= len_, "truncate: length ", len, " outside [0, ", len_, "]");
    len_ = len;
    step_len_ = 0;
  }

 private:
  // x [T, K] times w [N, K]^T (+ b): the skinny GEMM where it pays (cpu_gemm_pays), ATen's linear otherwise. Threads
  // (--threads) split the weight rows, at least 256 rows each, so small models stay on one thread.
  at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = at::Tensor()) const {
    if (!cpu_gemm_ || !cpu_gemm_pays(static_cast<int>(x.size(0)), w.size(0), w.size(1)) || !w.is_contiguous())
      return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
    const at::Tensor xc = x.contiguous();
    const int M = static_cast<int>(xc.size(0)), K = static_cast<int>(xc.size(1)), N = static_cast<int>(w.size(0));
    at::Tensor y = at::empty({M, N}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    at::parallel_for(0, (N + 3) / 4, 64, [&](int64_t b0, int64_t b1) {
      cpu_gemm_rows(xp, M, K, wp, static_cast<int>(b0 * 4), static_cast<int>(std::min<int64_t>(N, b1 * 4)), yp, N);
    });
    return b.defined() ? y.add_(b) : y;
  }

  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w) const {
    at::Tensor xf = x.to(at::kFloat);
    at::Tensor r = at::rsqrt(xf.pow(2).mean(-1, true).add_(cfg_.rms_eps));
    return w * (xf * r).to(dt_);
  }

  static at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    const int64_t half = x.size(-1) / 2;
    at::Tensor rot = at::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1);
    return x * cos + rot * sin;
  }

  void init_rope() {
    const int D = cfg_.head_dim;
    std::vector<double> inv(D / 2);
    for (int i = 0; i < D / 2; ++i) inv[i] = 1.0 / std::pow(cfg_.rope_theta, (2.0 * i) / D);
    const auto& rs = cfg_.rope_scaling;
    if (rs.type == "linear") {
      for (auto& f : inv) f /= rs.factor;
    } else if (rs.type == "llama3") {
      const double old = rs.original_max_position;
      const double low_wl = old / rs.low_freq_factor, high_wl = old / rs.high_freq_factor;
      for (auto& f : inv) {
        const double wl = 2 * M_PI / f;
        double nf = wl > low_wl ? f / rs.factor : f;
        if (!(wl < high_wl) && !(wl > low_wl)) {
          const double s = (old / wl - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
          nf = (1 - s) * nf / rs.factor + s * nf;
        }
        f = nf;
      }
    }
    // Same arithmetic as Hugging Face: float32 inv_freq times float32 positions.
    std::vector<float> invf(inv.begin(), inv.end());
    at::Tensor tinv = at::from_blob(invf.data(), {D / 2}, at::TensorOptions().dtype(at::kFloat)).clone();
    inv_freq_ = tinv.to(dev_);
    at::Tensor tp = at::arange(cfg_.max_positions, at::TensorOptions().dtype(at::kFloat));
    at::Tensor freqs = at::outer(tp, tinv);
    at::Tensor emb = at::cat({freqs, freqs}, -1);
    cos_ = emb.cos().to(dev_);
    sin_ = emb.sin().to(dev_);
  }

  // Doubling, but not past the context (+256 rows of step slack) unless the step itself needs more.
  int grown_capacity(int need) const { return std::max(need, std::min(cap_ * 2, cfg_.max_positions + 256)); }

  void alloc_cache(int cap, int keep = 0) {
    c10::InferenceMode ng;
    auto opt = at::TensorOptions().dtype(dt_).device(dev_);
    std::vector<at::Tensor> nk, nv;
    for (int l = 0; l < cfg_.layers; ++l) {
      at::Tensor k = at::zeros({cap, cfg_.kv_heads, cfg_.head_dim}, opt);
      at::Tensor v = at::zeros({cap, cfg_.kv_heads, cfg_.head_dim}, opt);
      if (keep > 0) {
        k.narrow(0, 0, keep).copy_(kc_[l].narrow(0, 0, keep));
        v.narrow(0, 0, keep).copy_(vc_[l].narrow(0, 0, keep));
      }
      nk.push_back(k);
      nv.push_back(v);
    }
    kc_ = std::move(nk);
    vc_ = std::move(nv);
    cap_ = cap;
#ifdef LOOKAHEAD_WITH_CUDA
    if (cf_) cf_->cache_changed();
#endif
  }

  at::Tensor sample(const at::Tensor& logits, const std::vector<int32_t>& positions, const SampleParams& sp) const {
    const int64_t T = logits.size(0), Vn = logits.size(1);
    at::Tensor l = logits / sp.temperature;
    if (sp.top_k > 0 && sp.top_k < Vn) {
      at::Tensor kth = std::get<0>(at::topk(l, sp.top_k, -1, true, true)).narrow(1, sp.top_k - 1, 1);
      l = l.masked_fill(l < kth, -INFINITY);
    }
    at::Tensor probs = at::softmax(l.to(at::kDouble), -1);
    auto [sorted, order] = probs.sort(/*stable=*/true, -1, /*descending=*/true);
    if (sp.top_p < 1.f) {
      at::Tensor cum = sorted.cumsum(-1);
      at::Tensor drop = (cum - sorted) >= static_cast<double>(sp.top_p);
      sorted = sorted.masked_fill(drop, 0.0);
    }
    at::Tensor cdf = sorted.cumsum(-1);
    std::vector<double> u(T);
    for (int64_t i = 0; i < T; ++i) u[i] = position_uniform(sp.seed, sp.stream, positions[i] + 1);
    at::Tensor tu = at::from_blob(u.data(), {T, 1}, at::TensorOptions().dtype(at::kDouble)).to(dev_);
    tu = tu * cdf.narrow(1, Vn - 1, 1);
    at::Tensor choice = (cdf <= tu).sum(-1, true).clamp_max(Vn - 1);
    return order.gather(1, choice).view({T});
  }

  ModelConfig cfg_;
  at::Device dev_;
  at::ScalarType dt_;
  std::string desc_;
  std::map<std::string, at::Tensor> named_;
  at::Tensor embed_, norm_, lm_head_, cos_, sin_, inv_freq_;
  std::vector<LayerW> layers_;
  std::vector<at::Tensor> kc_, vc_;
  int cap_ = 0, len_ = 0, step_len_ = 0;
  bool kernels_ = false, graphs_ = false;
  bool cpu_gemm_ = false;  // fp32 CPU steps use cpu_gemm_rows where cpu_gemm_pays
  std::string kernel_note_;  // shown in describe(): "kernels, graphs", or why the kernels are off
  std::string selfcheck_note_;
#ifdef LOOKAHEAD_WITH_CUDA
  std::shared_ptr<CudaForward> cf_;  // shared_ptr only so that fork()'s copy compiles; fork() resets it
#else
  std::shared_ptr<void> cf_;
#endif
};

at::Device make_device(const LoadOptions& o) {
  if (o.device == "cpu") return at::Device(at::kCPU);
  LA_CHECK(o.device == "cuda", "invalid --device '", o.device, "' (expected cpu or cuda)");
#ifdef LOOKAHEAD_WITH_CUDA
  const int n = cuda_device_count();
  LA_CHECK(n > 0, "--device cuda: no CUDA device is visible");
  LA_CHECK(o.device_index >= 0 && o.device_index < n, "--device cuda: device index ", o.device_index,
           " but only ", n, " device(s) visible");
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(o.device_index));
#else
  fail("--device cuda: this build has no CUDA support (rebuild with nvcc and a CUDA libtorch)");
#endif
}

// --selfcheck: the fast path is checked against the ATen forward on forks sharing the weights; the first path that
// agrees serves (src/model/selfcheck.cpp). Default: on with --device cuda, off on CPU.
std::unique_ptr<TorchLlama> apply_selfcheck(std::unique_ptr<TorchLlama> m, const LoadOptions& o) {
  const SelfCheckMode mode = parse_selfcheck_mode(o.selfcheck.empty() ? (o.device == "cuda" ? "on" : "off")
                                                                        : o.selfcheck);
  // By default only a model with a fast path is checked; an explicit --selfcheck always runs (on a CPU build
  // without one the candidate is the ATen forward itself: a check of the machinery).
  if (mode == SelfCheckMode::Off || o.kernels == "off" || (o.selfcheck.empty() && !m->has_fast_path())) return m;
  std::vector<ServingPath> paths;
  if (m->uses_graphs()) paths.push_back({true, true});
  paths.push_back({true, false});
  SelfCheckOptions so;
  so.mode = mode;
  so.dtype = o.dtype;
  const SelfCheckReport rep = run_selfcheck(
      [&](const ServingPath& p) {
        return selfcheck_fault_for_testing(std::unique_ptr<StepModel>(m->fork_with(p.kernels, p.graphs)), p);
      },
      paths, so);
  if (!(rep.serving == paths.front())) m = m->fork_with(rep.serving.kernels, rep.serving.graphs);
  m->set_selfcheck_note(rep.summary());
  return m;
}

}  // namespace

std::unique_ptr<StepModel> fork_with_kernels(const StepModel& model, bool kernels, bool graphs) {
  const auto* tm = dynamic_cast<const TorchLlama*>(&model);
  LA_CHECK(tm != nullptr, "fork_with_kernels: not a libtorch model");
  return tm->fork_with(kernels, graphs);
}

int cuda_device_count() {
#ifdef LOOKAHEAD_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

bool is_random_model(const std::string& m) { return m.rfind("random:", 0) == 0; }

namespace {
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
}  // namespace

ModelConfig model_config_of(const std::string& model) {
  if (is_random_model(model)) {
    std::string name;
    uint64_t seed;
    parse_random(model, name, seed);
    return preset_config(name);
  }
  return load_model_config(model);
}

std::unique_ptr<StepModel> load_llama(const LoadOptions& o) {
  const at::ScalarType dt = parse_dtype(o.dtype);
  LA_CHECK(o.kernels == "on" || o.kernels == "off", "invalid --kernels '", o.kernels, "' (expected on or off)");
  if (o.threads > 0) at::set_num_threads(o.threads);
  const at::Device dev = make_device(o);
  c10::InferenceMode ng;
  std::map<std::string, at::Tensor> w;
  ModelConfig cfg;
  std::string desc;
  if (is_random_model(o.model)) {
    std::string name;
    uint64_t seed;
    parse_random(o.model, name, seed);
    cfg = preset_config(name);
    // Dummy weights at real shapes: matrices uniform with std 1/sqrt(fan_in) (so every layer changes the residual
    // stream and greedy outputs are not just the input token), embeddings uniform(-1, 1), norms near 1.
    at::Generator gen = at::detail::createCPUGenerator(seed);
    for (auto& [n, shape] : expected_tensors(cfg)) {
      at::Tensor t;
      if (n.find("norm") != std::string::npos) {
        t = at::empty(shape, at::TensorOptions().dtype(at::kFloat)).uniform_(0.8, 1.2, gen);
      } else if (n.find(".bias") != std::string::npos) {
        t = at::empty(shape, at::TensorOptions().dtype(at::kFloat)).uniform_(-0.1, 0.1, gen);
      } else if (n == "model.embed_tokens.weight") {
        t = at::empty(shape, at::TensorOptions().dtype(at::kFloat)).uniform_(-1.0, 1.0, gen);
      } else {
        const double a = std::sqrt(3.0 / static_cast<double>(shape.back()));
        t = at::empty(shape, at::TensorOptions().dtype(at::kFloat)).uniform_(-a, a, gen);
      }
      w[n] = t.to(dev, dt);
    }
    desc = o.model;
  } else {
    cfg = load_model_config(o.model);
    auto ck = SafetensorsCheckpoint::open(o.model);
    check_checkpoint(ck, cfg, o.model);
    for (auto& [n, shape] : expected_tensors(cfg)) {
      const auto& v = ck.get(n);
      at::Tensor t = at::from_blob(const_cast<void*>(v.data), v.shape, at::TensorOptions().dtype(to_scalar(v.dtype)));
      w[n] = t.to(dev, dt, /*non_blocking=*/false, /*copy=*/true);
    }
    // Llama with attention_bias also has an o_proj bias (Qwen2 does not): optional.
    for (int l = 0; l < cfg.layers && cfg.attention_bias; ++l) {
      const std::string n = "model.layers." + std::to_string(l) + ".self_attn.o_proj.bias";
      if (!ck.has(n)) continue;
      const auto& v = ck.get(n);
      LA_CHECK(v.shape == std::vector<int64_t>{cfg.hidden}, o.model, ": tensor '", n, "' has the wrong shape");
      at::Tensor t = at::from_blob(const_cast<void*>(v.data), v.shape, at::TensorOptions().dtype(to_scalar(v.dtype)));
      w[n] = t.to(dev, dt, false, true);
    }
    desc = o.model;
  }
  // --max-context: the context (and so the KV cache's largest size) below the model's own limit.
  LA_CHECK(o.max_context >= 0, "invalid --max-context ", o.max_context, " (expected a token count, 0: the model's)");
  if (o.max_context > 0) cfg.max_positions = std::min(cfg.max_positions, o.max_context);
  auto m = std::make_unique<TorchLlama>(cfg, dev, dt, desc + " [" + o.dtype + ", " + o.device + "]",
                                        o.kernels == "on", o.cuda_graphs);
  m->set_weights(std::move(w));
  return apply_selfcheck(std::move(m), o);
}

void save_hf_directory(StepModel& model, const std::string& dir) {
  auto* tm = dynamic_cast<TorchLlama*>(&model);
  LA_CHECK(tm != nullptr, "save: not a libtorch model");
  const auto& c = tm->config();
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
                        {"hidden_act", "silu"},
                        {"tie_word_embeddings", c.tie_word_embeddings},
                        {"bos_token_id", c.bos_id},
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
  write_file_atomic(dir + "/config.json", cfg.dump(2));
  write_file_atomic(dir + "/generation_config.json",
                    nlohmann::json{{"bos_token_id", c.bos_id}, {"eos_token_id", c.eos_ids}}.dump(2));
  // safetensors, F32
  nlohmann::json header = nlohmann::json::object();
  std::string body;
  for (auto& [n, t] : tm->named()) {
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
