// The ATen reference forward as short functions: norm, rope, attention, MLP, layer (see torch_reference.h).
#include "torch_reference.h"

#include <cmath>

namespace la {
namespace {

// RMSNorm over the last dim. Llama: w * normed, rounded to the dtype first; Gemma: normed * (1 + w) in fp32,
// then rounded (transformers' Gemma2/3RMSNorm).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, bool gemma = false) {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor r = at::rsqrt(xf.pow(2).mean(-1, true).add_(eps));
  if (gemma) return (xf * r * (w.to(at::kFloat) + 1.0)).to(x.scalar_type());
  return w * (xf * r).to(x.scalar_type());
}

// Rotate-half RoPE of the first R dims of each head: x [T, H, D], cos/sin [T, 1, R] (R < D: Phi-3's partial rotary,
// the rest passes unchanged).
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t D = x.size(-1), R = cos.size(-1), half = R / 2;
  const at::Tensor xr = R == D ? x : x.narrow(-1, 0, R);
  at::Tensor rot = at::cat({xr.narrow(-1, half, half).neg(), xr.narrow(-1, 0, half)}, -1);
  at::Tensor y = xr * cos + rot * sin;
  return R == D ? y : at::cat({y, x.narrow(-1, R, D - R)}, -1);
}

// Additive mask [T, L + T] over [cache | step]: the cache is visible, among step tokens only ancestors and self.
// Undefined for a single token (it sees everything).
at::Tensor tree_mask(const StepInput& in, int L, at::Device dev) {
  const int T = static_cast<int>(in.tokens.size());
  if (T == 1) return at::Tensor();
  std::vector<float> m(static_cast<size_t>(T) * T, -INFINITY);
  for (int i = 0; i < T; ++i)
    for (int a = i; a >= 0; a = in.parents[a]) m[static_cast<size_t>(i) * T + a] = 0.f;
  at::Tensor tt = at::from_blob(m.data(), {T, T}, at::TensorOptions().dtype(at::kFloat)).to(dev);
  at::Tensor mask = at::zeros({T, L + T}, at::TensorOptions().dtype(at::kFloat).device(dev));
  mask.narrow(1, L, T).copy_(tt);
  return mask;
}

// The sliding-window layers' view: cache rows from `first` on (rows before it are outside every step token's
// window, so they are not read at all) and a mask [T, L - first + T] that also hides keys at positions
// <= pos - window. The step's own tokens are ancestors at positions between L and pos, hidden the same way.
struct WindowMask {
  int first = 0;
  at::Tensor mask;  // undefined: everything from `first` on is visible to every step token
};
WindowMask window_mask(const StepInput& in, int L, int window, at::Device dev) {
  const int T = static_cast<int>(in.tokens.size());
  int min_pos = in.positions[0];
  for (int p : in.positions) min_pos = std::min(min_pos, p);
  WindowMask wm;
  wm.first = std::min(L, std::max(0, min_pos - window + 1));
  const int C = L - wm.first;  // cache columns kept
  std::vector<float> m(static_cast<size_t>(T) * (C + T), -INFINITY);
  bool all = true;
  for (int i = 0; i < T; ++i) {
    const int lo = in.positions[i] - window;  // keys at positions <= lo are outside the window
    float* row = m.data() + static_cast<size_t>(i) * (C + T);
    for (int j = 0; j < C; ++j) row[j] = wm.first + j > lo ? 0.f : -INFINITY;
    for (int a = i; a >= 0; a = in.parents[a])
      if (in.positions[a] > lo) row[C + a] = 0.f;
    for (int j = 0; j < C + T; ++j) all = all && (row[j] == 0.f || j >= C);
  }
  if (T == 1 && all) return wm;
  // A copy: on the CPU .to(dev) alone would return the blob itself, which `m` frees on return.
  wm.mask = at::from_blob(m.data(), {T, C + T}, at::TensorOptions().dtype(at::kFloat)).to(dev, false, true);
  return wm;
}

// Grouped-query attention of q [T, Hq, D] over K/V [S, Hkv, D] under `mask`; returns [T, Hq * D]. Scores are
// scaled by `scale`, then soft-capped (cap * tanh(s / cap), Gemma-2) if softcap > 0, then masked.
at::Tensor attention(const at::Tensor& q, const at::Tensor& K, const at::Tensor& V, const at::Tensor& mask,
                     double scale, double softcap) {
  const int64_t T = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = K.size(1), S = K.size(0), g = Hq / Hkv;
  at::Tensor qh = q.view({T, Hkv, g, D}).permute({1, 2, 0, 3}).reshape({Hkv, g * T, D});
  at::Tensor sc = at::bmm(qh, K.permute({1, 2, 0})).to(at::kFloat).mul_(scale);  // [Hkv, g*T, S]
  if (softcap > 0) sc = sc.div_(softcap).tanh_().mul_(softcap);
  if (mask.defined()) sc = sc.view({Hkv, g, T, S}).add_(mask).view({Hkv, g * T, S});
  at::Tensor p = at::softmax(sc, -1).to(q.scalar_type());
  at::Tensor o = at::bmm(p, V.permute({1, 0, 2}));  // [Hkv, g*T, D]
  return o.view({Hkv, g, T, D}).permute({2, 0, 1, 3}).reshape({T, Hq * D});
}

at::Tensor affine(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = at::Tensor()) {
  return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
}

// Gated MLP: act(gate) * up, act SiLU (SwiGLU) or tanh-approximated GELU (Gemma's GeGLU).
at::Tensor gated_mlp(const at::Tensor& h, const LayerW& W, int64_t I, bool gelu) {
  at::Tensor gu = affine(h, W.wgu);
  at::Tensor g = gu.narrow(1, 0, I);
  return affine((gelu ? at::gelu(g, "tanh") : at::silu(g)) * gu.narrow(1, I, I), W.wd);
}

// What every layer of a step shares.
struct StepCtx {
  at::Tensor cos, sin, cos_local, sin_local;  // [T, 1, R]
  at::Tensor mask;                             // full-attention layers
  WindowMask window;                           // sliding-window layers
  int L = 0;
};

// One decoder layer: x + attention(norm(x)), then + mlp(norm(x)); Gemma-2/3 also norm each branch's output
// (sandwich norms). Writes the step's K/V at cache rows L..L+T-1.
at::Tensor layer(const ModelConfig& c, int l, const LayerW& W, at::Tensor& kc, at::Tensor& vc, const at::Tensor& x,
                 const StepCtx& s) {
  const int64_t T = x.size(0), D = c.head_dim, Q = int64_t(c.heads) * D, KV = int64_t(c.kv_heads) * D;
  const bool g = c.gemma_norms, sliding = c.is_sliding(l);
  const int L = s.L;
  at::Tensor qkv = affine(rms_norm(x, W.ln1, c.rms_eps, g), W.wqkv, W.bqkv);
  at::Tensor q = qkv.narrow(1, 0, Q).view({T, c.heads, D});
  at::Tensor k = qkv.narrow(1, Q, KV).view({T, c.kv_heads, D});
  if (c.qk_norm) {  // per head, before RoPE (Qwen3, Gemma-3)
    q = rms_norm(q, W.qn, c.rms_eps, g);
    k = rms_norm(k, W.kn, c.rms_eps, g);
  }
  const bool local = sliding && s.cos_local.defined();
  q = rope(q, local ? s.cos_local : s.cos, local ? s.sin_local : s.sin);
  k = rope(k, local ? s.cos_local : s.cos, local ? s.sin_local : s.sin);
  kc.narrow(0, L, T).copy_(k);
  vc.narrow(0, L, T).copy_(qkv.narrow(1, Q + KV, KV).view({T, c.kv_heads, D}));
  const double scale = 1.0 / std::sqrt(c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : double(D));
  const int first = sliding ? s.window.first : 0;
  at::Tensor o = attention(q, kc.narrow(0, first, L + T - first), vc.narrow(0, first, L + T - first),
                           sliding ? s.window.mask : s.mask, scale, c.attn_softcap);
  at::Tensor a = affine(o, W.wo, W.bo);
  if (c.sandwich_norms) {
    at::Tensor y = x + rms_norm(a, W.ln2, c.rms_eps, g);
    at::Tensor m = gated_mlp(rms_norm(y, W.ln_pre_ff, c.rms_eps, g), W, c.intermediate, c.hidden_act != "silu");
    return y + rms_norm(m, W.ln_post_ff, c.rms_eps, g);
  }
  at::Tensor y = x + a;
  return y + gated_mlp(rms_norm(y, W.ln2, c.rms_eps, g), W, c.intermediate, c.hidden_act != "silu");
}

// cos/sin [max_positions, R] of inverse frequencies `inv` (fp32, as Hugging Face).
void rope_table(const std::vector<double>& inv, int max_positions, at::Device dev, at::Tensor* inv_out,
                at::Tensor& cos, at::Tensor& sin) {
  std::vector<float> invf(inv.begin(), inv.end());
  const int64_t n = static_cast<int64_t>(invf.size());
  at::Tensor tinv = at::from_blob(invf.data(), {n}, at::TensorOptions().dtype(at::kFloat)).clone();
  at::Tensor freqs = at::outer(at::arange(max_positions, at::TensorOptions().dtype(at::kFloat)), tinv);
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  if (inv_out) *inv_out = tinv.to(dev);
  cos = emb.cos().to(dev);
  sin = emb.sin().to(dev);
}

}  // namespace

RopeTables make_rope_tables(const ModelConfig& cfg, at::Device dev) {
  const int D = cfg.rotary();  // transformers: dim = int(head_dim * partial_rotary_factor)
  std::vector<double> inv(D / 2);
  for (int i = 0; i < D / 2; ++i) inv[i] = 1.0 / std::pow(cfg.rope_theta, (2.0 * i) / D);
  const auto& rs = cfg.rope_scaling;
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
  RopeTables t;
  rope_table(inv, cfg.max_positions, dev, &t.inv_freq, t.cos, t.sin);
  if (cfg.local_rope_theta > 0 && cfg.any_sliding()) {  // Gemma-3's sliding layers: default RoPE, own base
    std::vector<double> loc(D / 2);
    for (int i = 0; i < D / 2; ++i) loc[i] = 1.0 / std::pow(cfg.local_rope_theta, (2.0 * i) / D);
    rope_table(loc, cfg.max_positions, dev, nullptr, t.cos_local, t.sin_local);
  }
  return t;
}

KvCache make_kv_cache(const TorchWeights& w, int cap, const KvCache* old, int keep) {
  auto opt = at::TensorOptions().dtype(w.dtype).device(w.device);
  KvCache c;
  // On the CPU left uninitialized: both forwards write a step's rows L .. L+T-1 before reading them and read no row
  // past them, so the cache's pages become resident as the context grows, not at allocation (a zeroed 4352-row
  // cache of Gemma-3-270M in fp32 is 153 MiB). CUDA: zeroed (its kernels pad steps).
  const bool zero = !w.device.is_cpu();
  for (int l = 0; l < w.cfg.layers; ++l) {
    at::Tensor k = zero ? at::zeros({cap, w.cfg.kv_heads, w.cfg.head_dim}, opt)
                        : at::empty({cap, w.cfg.kv_heads, w.cfg.head_dim}, opt);
    at::Tensor v = zero ? at::zeros({cap, w.cfg.kv_heads, w.cfg.head_dim}, opt)
                        : at::empty({cap, w.cfg.kv_heads, w.cfg.head_dim}, opt);
    if (old && keep > 0) {
      k.narrow(0, 0, keep).copy_(old->k[l].narrow(0, 0, keep));
      v.narrow(0, 0, keep).copy_(old->v[l].narrow(0, 0, keep));
    }
    c.k.push_back(k);
    c.v.push_back(v);
  }
  return c;
}

at::Tensor reference_forward(const TorchWeights& w, const RopeTables& rope, KvCache& cache, const StepInput& in,
                             int L) {
  const int T = static_cast<int>(in.tokens.size());
  const at::Device dev = w.device;
  auto i64 = at::TensorOptions().dtype(at::kLong);
  std::vector<int64_t> ids(in.tokens.begin(), in.tokens.end()), pos(in.positions.begin(), in.positions.end());
  at::Tensor tid = at::from_blob(ids.data(), {T}, i64).to(dev);
  at::Tensor tpos = at::from_blob(pos.data(), {T}, i64).to(dev);
  const ModelConfig& c = w.cfg;
  StepCtx s;
  s.L = L;
  s.mask = tree_mask(in, L, dev);
  if (c.any_sliding()) s.window = window_mask(in, L, c.sliding_window, dev);
  const int R = c.rotary();
  s.cos = rope.cos.index_select(0, tpos).to(w.dtype).view({T, 1, R});
  s.sin = rope.sin.index_select(0, tpos).to(w.dtype).view({T, 1, R});
  if (rope.cos_local.defined()) {
    s.cos_local = rope.cos_local.index_select(0, tpos).to(w.dtype).view({T, 1, R});
    s.sin_local = rope.sin_local.index_select(0, tpos).to(w.dtype).view({T, 1, R});
  }
  at::Tensor x = w.embed.index_select(0, tid);
  // Gemma: embeddings times sqrt(hidden), that factor rounded to the dtype first (as transformers).
  if (c.gemma_norms) x = x * at::scalar_tensor(std::sqrt(double(c.hidden)), at::kFloat).to(w.dtype).to(dev);
  for (int l = 0; l < c.layers; ++l) x = layer(c, l, w.layers[l], cache.k[l], cache.v[l], x, s);
  at::Tensor logits = affine(rms_norm(x, w.norm, c.rms_eps, c.gemma_norms), w.lm_head).to(at::kFloat);
  if (c.final_softcap > 0) logits = logits.div_(c.final_softcap).tanh_().mul_(c.final_softcap);
  return logits;
}

}  // namespace la
