// The CPU step forward (what it computes and why it is batch-invariant: include/lookahead/cpu/cpu_forward.h).
#include "lookahead/cpu/cpu_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lookahead/cpu/isa.h"
#include "lookahead/cpu/rmsnorm.h"
#include "lookahead/cpu/rope.h"
#include "lookahead/cpu/swiglu.h"
#include "lookahead/cpu/thread_pool.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

std::vector<float> widen(const void* p, WType t, long n) {
  std::vector<float> out(n);
  for (long i = 0; i < n; ++i) out[i] = load_f32(p, t, i);
  return out;
}

}  // namespace

std::string CpuForward::unsupported_reason(const ModelConfig& cfg) {
  // Architecture features these kernels do not implement yet (q/k norms, partial rotary, GeGLU, Gemma norms,
  // soft-capping, sliding windows): the ATen reference forward serves those models.
  if (!cfg.features().empty()) return "the CPU kernels lack " + cfg.features();
  if (cfg.head_dim % 2 != 0) return "odd head_dim " + std::to_string(cfg.head_dim);
  if (cfg.kv_heads <= 0 || cfg.heads % cfg.kv_heads != 0) return "heads not a multiple of kv_heads";
  return "";
}

CpuForward::CpuForward(const ModelConfig& cfg, const CpuModelView& w, std::shared_ptr<ThreadPool> pool)
    : cfg_(cfg), w_(w), pool_(std::move(pool)) {
  const std::string why = unsupported_reason(cfg);
  LA_CHECK(why.empty(), "CPU kernels cannot serve this model: ", why);
  const int H = cfg.hidden, W = (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim;
  for (const auto& L : w.layers) {
    auto a = widen(L.ln1, w.type, H), b = widen(L.ln2, w.type, H);
    ln1_.insert(ln1_.end(), a.begin(), a.end());
    ln2_.insert(ln2_.end(), b.begin(), b.end());
    if (L.bqkv) {
      auto c = widen(L.bqkv, w.type, W);
      bqkv_.insert(bqkv_.end(), c.begin(), c.end());
    }
    if (L.bo) {
      auto d = widen(L.bo, w.type, H);
      bo_.insert(bo_.end(), d.begin(), d.end());
    }
  }
  LA_CHECK(bqkv_.empty() || bqkv_.size() == size_t(W) * w.layers.size(), "CPU forward: q/k/v biases on some layers only");
  LA_CHECK(bo_.empty() || bo_.size() == size_t(H) * w.layers.size(), "CPU forward: o_proj biases on some layers only");
  norm_ = widen(w.norm, w.type, H);
}

CpuForward::~CpuForward() = default;

int CpuForward::threads() const { return pool_->size(); }

std::string CpuForward::describe() const {
  return std::string("cpu kernels ") + cpu_isa_name(cpu_isa()) + ", " + std::to_string(pool_->size()) +
         (pool_->size() == 1 ? " thread" : " threads");
}

void CpuForward::set_cache(const std::vector<void*>& k, const std::vector<void*>& v, int capacity) {
  kc_ = k;
  vc_ = v;
  capacity_ = capacity;
  att_scratch_.reserve(pool_->size(), cfg_.heads / cfg_.kv_heads, capacity);
}

void CpuForward::grow(int T, int keys) {
  if (T > rows_) {
    const size_t H = cfg_.hidden, W = size_t(cfg_.heads + 2 * cfg_.kv_heads) * cfg_.head_dim;
    const size_t I = cfg_.intermediate, Q = size_t(cfg_.heads) * cfg_.head_dim;
    x_.resize(T * H);
    h_.resize(T * H);
    qkv_.resize(T * W);
    att_.resize(T * Q);
    gu_.resize(T * 2 * I);
    act_.resize(T * I);
    logits_.resize(size_t(T) * cfg_.vocab);
    rows_ = T;
  }
  att_scratch_.reserve(pool_->size(), cfg_.heads / cfg_.kv_heads, keys);
}

void CpuForward::layer(int l, const StepInput& in, int T, int L) {
  ThreadPool& P = *pool_;
  const CpuLayerView& W = w_.layers[l];
  const int H = cfg_.hidden, D = cfg_.head_dim, Hq = cfg_.heads, Hkv = cfg_.kv_heads, I = cfg_.intermediate;
  const int Q = Hq * D, KV = Hkv * D, WQ = Q + 2 * KV;
  const float eps = float(cfg_.rms_eps);
  float* x = x_.data();
  float* h = h_.data();
  float* qkv = qkv_.data();

  rms_norm_rows(P, x, H, ln1_.data() + long(l) * H, T, H, eps, h, H);
  gemm(P, h, T, W.wqkv, GemmOut{qkv, WQ, bqkv_.empty() ? nullptr : bqkv_.data() + long(l) * WQ, false});
  rope_rows(qkv, WQ, Hq, D, in.positions.data(), T, w_.rope_cos, w_.rope_sin);
  rope_rows(qkv + Q, WQ, Hkv, D, in.positions.data(), T, w_.rope_cos, w_.rope_sin);
  for (int t = 0; t < T; ++t)  // the step's K/V into the cache, in the model's dtype
    for (int i = 0; i < KV; ++i) {
      store_from_f32(kc_[l], w_.type, long(L + t) * KV + i, qkv[long(t) * WQ + Q + i]);
      store_from_f32(vc_[l], w_.type, long(L + t) * KV + i, qkv[long(t) * WQ + Q + KV + i]);
    }
  const AttentionShape as{Hq, Hkv, D, float(1.0 / std::sqrt(double(D)))};
  step_attention(P, att_scratch_, as, qkv, WQ, KvLayer{kc_[l], vc_[l], w_.type}, L, in.parents.data(), T,
                 att_.data(), Q);
  gemm(P, att_.data(), T, W.wo, GemmOut{x, H, bo_.empty() ? nullptr : bo_.data() + long(l) * H, true});

  rms_norm_rows(P, x, H, ln2_.data() + long(l) * H, T, H, eps, h, H);
  gemm(P, h, T, W.wgu, GemmOut{gu_.data(), 2 * I, nullptr, false});
  swiglu_rows(P, gu_.data(), 2 * I, T, I, act_.data(), I);
  gemm(P, act_.data(), T, W.wd, GemmOut{x, H, nullptr, true});
}

const float* CpuForward::run(const StepInput& in, int L) {
  const int T = static_cast<int>(in.tokens.size()), H = cfg_.hidden;
  LA_CHECK(L + T <= capacity_, "CPU forward: step of ", T, " on ", L, " cached rows exceeds the cache (", capacity_,
           ")");
  grow(T, L + T);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < H; ++i) x_[long(t) * H + i] = load_f32(w_.embed, w_.type, long(in.tokens[t]) * H + i);
  for (int l = 0; l < cfg_.layers; ++l) layer(l, in, T, L);
  rms_norm_rows(*pool_, x_.data(), H, norm_.data(), T, H, float(cfg_.rms_eps), h_.data(), H);
  gemm(*pool_, h_.data(), T, w_.lm_head, GemmOut{logits_.data(), cfg_.vocab, nullptr, false});
  return logits_.data();
}

void CpuForward::argmax(int T, int32_t* out) const {
  const int V = cfg_.vocab;
  for (int t = 0; t < T; ++t) {
    const float* r = logits_.data() + long(t) * V;
    int best = 0;
    for (int i = 1; i < V; ++i)
      if (r[i] > r[best] || (std::isnan(r[i]) && !std::isnan(r[best]))) best = i;
    out[t] = best;
  }
}

void CpuForward::commit_rows(const std::vector<int32_t>& idx, int L) {
  const size_t row = size_t(cfg_.kv_heads) * cfg_.head_dim * wtype_size(w_.type);
  for (int l = 0; l < cfg_.layers; ++l)
    for (size_t j = 0; j < idx.size(); ++j) {
      if (idx[j] == int(j)) continue;
      auto* k = static_cast<char*>(kc_[l]);
      auto* v = static_cast<char*>(vc_[l]);
      std::memmove(k + (L + j) * row, k + (L + idx[j]) * row, row);
      std::memmove(v + (L + j) * row, v + (L + idx[j]) * row, row);
    }
}

}  // namespace la
