// The ATen reference forward as short functions: norm, rope, attention, MLP, layer (see torch_reference.h).
#include "torch_reference.h"

#include <cmath>

namespace la {
namespace {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor r = at::rsqrt(xf.pow(2).mean(-1, true).add_(eps));
  return w * (xf * r).to(x.scalar_type());
}

// Rotate-half RoPE: x [T, H, D], cos/sin [T, 1, D].
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor rot = at::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1);
  return x * cos + rot * sin;
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

// Grouped-query attention of q [T, Hq, D] over K/V [S, Hkv, D] under `mask`; returns [T, Hq * D].
at::Tensor attention(const at::Tensor& q, const at::Tensor& K, const at::Tensor& V, const at::Tensor& mask) {
  const int64_t T = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = K.size(1), S = K.size(0), g = Hq / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  at::Tensor qh = q.view({T, Hkv, g, D}).permute({1, 2, 0, 3}).reshape({Hkv, g * T, D});
  at::Tensor sc = at::bmm(qh, K.permute({1, 2, 0})).to(at::kFloat).mul_(scale);  // [Hkv, g*T, S]
  if (mask.defined()) sc = sc.view({Hkv, g, T, S}).add_(mask).view({Hkv, g * T, S});
  at::Tensor p = at::softmax(sc, -1).to(q.scalar_type());
  at::Tensor o = at::bmm(p, V.permute({1, 0, 2}));  // [Hkv, g*T, D]
  return o.view({Hkv, g, T, D}).permute({2, 0, 1, 3}).reshape({T, Hq * D});
}

at::Tensor affine(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = at::Tensor()) {
  return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
}

at::Tensor swiglu_mlp(const at::Tensor& h, const LayerW& W, int64_t I) {
  at::Tensor gu = affine(h, W.wgu);
  return affine(at::silu(gu.narrow(1, 0, I)) * gu.narrow(1, I, I), W.wd);
}

// One decoder layer: x + attention(norm(x)), then + mlp(norm(x)). Writes the step's K/V at cache rows L..L+T-1.
at::Tensor layer(const ModelConfig& c, const LayerW& W, at::Tensor& kc, at::Tensor& vc, const at::Tensor& x,
                 const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask, int L) {
  const int64_t T = x.size(0), Q = int64_t(c.heads) * c.head_dim, KV = int64_t(c.kv_heads) * c.head_dim;
  at::Tensor qkv = affine(rms_norm(x, W.ln1, c.rms_eps), W.wqkv, W.bqkv);
  at::Tensor q = rope(qkv.narrow(1, 0, Q).view({T, c.heads, c.head_dim}), cos, sin);
  at::Tensor k = rope(qkv.narrow(1, Q, KV).view({T, c.kv_heads, c.head_dim}), cos, sin);
  kc.narrow(0, L, T).copy_(k);
  vc.narrow(0, L, T).copy_(qkv.narrow(1, Q + KV, KV).view({T, c.kv_heads, c.head_dim}));
  at::Tensor o = attention(q, kc.narrow(0, 0, L + T), vc.narrow(0, 0, L + T), mask);
  at::Tensor y = x + affine(o, W.wo, W.bo);
  return y + swiglu_mlp(rms_norm(y, W.ln2, c.rms_eps), W, c.intermediate);
}

}  // namespace

RopeTables make_rope_tables(const ModelConfig& cfg, at::Device dev) {
  const int D = cfg.head_dim;
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
  std::vector<float> invf(inv.begin(), inv.end());
  at::Tensor tinv = at::from_blob(invf.data(), {D / 2}, at::TensorOptions().dtype(at::kFloat)).clone();
  at::Tensor freqs = at::outer(at::arange(cfg.max_positions, at::TensorOptions().dtype(at::kFloat)), tinv);
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  return RopeTables{tinv.to(dev), emb.cos().to(dev), emb.sin().to(dev)};
}

KvCache make_kv_cache(const TorchWeights& w, int cap, const KvCache* old, int keep) {
  auto opt = at::TensorOptions().dtype(w.dtype).device(w.device);
  KvCache c;
  for (int l = 0; l < w.cfg.layers; ++l) {
    at::Tensor k = at::zeros({cap, w.cfg.kv_heads, w.cfg.head_dim}, opt);
    at::Tensor v = at::zeros({cap, w.cfg.kv_heads, w.cfg.head_dim}, opt);
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
  const at::Tensor mask = tree_mask(in, L, dev);
  const int D = w.cfg.head_dim;
  at::Tensor cos = rope.cos.index_select(0, tpos).to(w.dtype).view({T, 1, D});
  at::Tensor sin = rope.sin.index_select(0, tpos).to(w.dtype).view({T, 1, D});
  at::Tensor x = w.embed.index_select(0, tid);
  for (int l = 0; l < w.cfg.layers; ++l) x = layer(w.cfg, w.layers[l], cache.k[l], cache.v[l], x, cos, sin, mask, L);
  return affine(rms_norm(x, w.norm, w.cfg.rms_eps), w.lm_head).to(at::kFloat);
}

}  // namespace la
