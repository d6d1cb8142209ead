// The CPU step forward (what it computes and why it is batch-invariant: include/lookahead/backend/cpu/cpu_forward.h).
#include "lookahead/backend/cpu/cpu_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lookahead/backend/cpu/geglu.h"
#include "lookahead/backend/cpu/head_norm.h"
#include "lookahead/backend/cpu/isa.h"
#include "lookahead/backend/cpu/rmsnorm.h"
#include "lookahead/backend/cpu/rope.h"
#include "lookahead/backend/cpu/softcap.h"
#include "lookahead/backend/cpu/swiglu.h"
#include "lookahead/backend/cpu/thread_pool.h"
#include "lookahead/model/quant.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

// n weights widened to fp32, plus `add` (Gemma's norms scale by 1 + w, added in fp32 as transformers does).
std::vector<float> widen(const void* p, WType t, long n, float add = 0.f) {
  std::vector<float> out(n);
  for (long i = 0; i < n; ++i) out[i] = load_f32(p, t, i) + add;
  return out;
}

void append(std::vector<float>& to, const std::vector<float>& v) { to.insert(to.end(), v.begin(), v.end()); }

// x[t] += y[t] for T rows of H (the residual add of a sandwich-normed branch).
void add_rows(float* x, const float* y, int T, int H) {
  for (long i = 0; i < long(T) * H; ++i) x[i] += y[i];
}

}  // namespace

std::string CpuForward::unsupported_reason(const ModelConfig& cfg) {
  // Every feature of ModelConfig::features() is implemented (cpu_forward.h); only these shapes are not.
  if (cfg.head_dim % 2 != 0) return "odd head_dim " + std::to_string(cfg.head_dim);
  if (cfg.rotary() % 2 != 0 || cfg.rotary() > cfg.head_dim) return "rotary dims " + std::to_string(cfg.rotary());
  if (cfg.hidden_act != "silu" && cfg.hidden_act != "gelu_pytorch_tanh") return "activation " + cfg.hidden_act;
  if (cfg.kv_heads <= 0 || cfg.heads % cfg.kv_heads != 0) return "heads not a multiple of kv_heads";
  return "";
}

CpuForward::CpuForward(const ModelConfig& cfg, const CpuModelView& w, std::shared_ptr<ThreadPool> pool)
    : cfg_(cfg), w_(w), pool_(std::move(pool)) {
  const std::string why = unsupported_reason(cfg);
  LA_CHECK(why.empty(), "CPU kernels cannot serve this model: ", why);
  const int H = cfg.hidden, W = (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim, D = cfg.head_dim;
  const float one = cfg.gemma_norms ? 1.f : 0.f;
  for (const auto& L : w.layers) {
    append(ln1_, widen(L.ln1, w.type, H, one));
    append(ln2_, widen(L.ln2, w.type, H, one));
    if (cfg.qk_norm) {
      LA_CHECK(L.qn && L.kn, "CPU forward: q/k norm weights missing");
      append(qn_, widen(L.qn, w.type, D, one));
      append(kn_, widen(L.kn, w.type, D, one));
    }
    if (cfg.sandwich_norms) {
      LA_CHECK(L.ln_pre_ff && L.ln_post_ff, "CPU forward: pre/post-feedforward norm weights missing");
      append(pre_ff_, widen(L.ln_pre_ff, w.type, H, one));
      append(post_ff_, widen(L.ln_post_ff, w.type, H, one));
    }
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
  norm_ = widen(w.norm, w.type, H, one);
  LA_CHECK(w.embed || w.embed_rows, "CPU forward: no embedding");
  if (w.embed_rows) {
    const QTypeInfo q = qtype_info(w.embed_rows->type);
    LA_CHECK(q.dequantizable && w.embed_rows->cols == H && q.block > 0 && H % q.block == 0 &&
                 long(w.embed_rows->rows.size()) == cfg.vocab,
             "CPU forward: the embedding's quantized rows (", qtype_name(w.embed_rows->type), ", ",
             w.embed_rows->rows.size(), " x ", w.embed_rows->cols, ") do not fit the model");
    erow_.resize(H);
  }
  if (cfg.gemma_norms) {  // transformers: torch.tensor(hidden ** 0.5, dtype=the model's dtype)
    uint32_t bits = 0;     // room for any of the dtypes
    store_from_f32(&bits, w.type, 0, float(std::sqrt(double(H))));
    embed_scale_ = load_f32(&bits, w.type, 0);
  }
}

CpuForward::~CpuForward() = default;

int CpuForward::threads() const { return pool_->size(); }

std::string CpuForward::describe() const {
  return std::string("cpu kernels ") + cpu_isa_name(cpu_isa()) + ", " + std::to_string(pool_->size()) +
         (pool_->size() == 1 ? " thread" : " threads");
}

void CpuForward::set_cache(const std::vector<void*>& k, const std::vector<void*>& v, int capacity) {
  cache_.k = k;
  cache_.v = v;
  cache_.capacity = capacity;
  att_scratch_.reserve(pool_->size(), cfg_.heads / cfg_.kv_heads, capacity);
}

void CpuForward::grow(int T, int keys) {
  if (T > rows_) {
    const size_t H = cfg_.hidden, W = size_t(cfg_.heads + 2 * cfg_.kv_heads) * cfg_.head_dim;
    const size_t I = cfg_.intermediate, Q = size_t(cfg_.heads) * cfg_.head_dim;
    x_.resize(T * H);
    h_.resize(T * H);
    if (cfg_.sandwich_norms) a_.resize(T * H);
    qkv_.resize(T * W);
    attn_.resize(T * Q);
    positions_.resize(T);
    gu_.resize(T * 2 * I);
    act_.resize(T * I);
    logit_row_.resize(T);
    rows_ = T;
  }
  att_scratch_.reserve(pool_->size(), cfg_.heads / cfg_.kv_heads, keys);
}

void CpuForward::layer(int l, const CpuSegment* segs, int n, int T) {
  ThreadPool& P = *pool_;
  const CpuLayerView& W = w_.layers[l];
  const int H = cfg_.hidden, D = cfg_.head_dim, Hq = cfg_.heads, Hkv = cfg_.kv_heads, I = cfg_.intermediate;
  const int Q = Hq * D, KV = Hkv * D, WQ = Q + 2 * KV, R = cfg_.rotary();
  const float eps = float(cfg_.rms_eps);
  const bool sliding = cfg_.is_sliding(l), sandwich = cfg_.sandwich_norms;
  float* x = x_.data();
  float* h = h_.data();
  float* qkv = qkv_.data();
  const int32_t* pos = positions_.data();

  rms_norm_rows(P, x, H, ln1_.data() + long(l) * H, T, H, eps, h, H);
  gemm(P, h, T, W.wqkv, GemmOut{qkv, WQ, bqkv_.empty() ? nullptr : bqkv_.data() + long(l) * WQ, false});
  if (cfg_.qk_norm) {  // per head, before RoPE
    rms_norm_heads(P, qkv, WQ, T, Hq, D, qn_.data() + long(l) * D, eps);
    rms_norm_heads(P, qkv + Q, WQ, T, Hkv, D, kn_.data() + long(l) * D, eps);
  }
  const bool local = sliding && w_.rope_cos_local;  // Gemma-3's sliding layers: their own RoPE base
  const float* cos = local ? w_.rope_cos_local : w_.rope_cos;
  const float* sin = local ? w_.rope_sin_local : w_.rope_sin;
  rope_rows(qkv, WQ, Hq, D, R, pos, T, cos, sin);
  rope_rows(qkv + Q, WQ, Hkv, D, R, pos, T, cos, sin);
  for (int s = 0; s < n; ++s) {  // each segment's K/V into its own cache, in the model's dtype
    void* kc = segs[s].cache->k[l];
    void* vc = segs[s].cache->v[l];
    const int row = att_[s].row0;
    for (int t = 0; t < att_[s].T; ++t)
      for (int i = 0; i < KV; ++i) {
        store_from_f32(kc, w_.type, long(segs[s].L + t) * KV + i, qkv[long(row + t) * WQ + Q + i]);
        store_from_f32(vc, w_.type, long(segs[s].L + t) * KV + i, qkv[long(row + t) * WQ + Q + KV + i]);
      }
    att_[s].kv = KvLayer{kc, vc, w_.type};
  }
  const double qs = cfg_.query_pre_attn_scalar > 0 ? cfg_.query_pre_attn_scalar : double(D);
  AttentionShape as{Hq, Hkv, D, float(1.0 / std::sqrt(qs))};
  as.softcap = float(cfg_.attn_softcap);
  as.window = sliding ? cfg_.sliding_window : 0;
  step_attention(P, att_scratch_, as, qkv, WQ, att_.data(), n, attn_.data(), Q);
  const float* bo = bo_.empty() ? nullptr : bo_.data() + long(l) * H;
  if (sandwich) {  // x += norm(attention); x += norm(mlp(norm(x)))
    gemm(P, attn_.data(), T, W.wo, GemmOut{a_.data(), H, bo, false});
    rms_norm_rows(P, a_.data(), H, ln2_.data() + long(l) * H, T, H, eps, h, H);
    add_rows(x, h, T, H);
    rms_norm_rows(P, x, H, pre_ff_.data() + long(l) * H, T, H, eps, h, H);
  } else {
    gemm(P, attn_.data(), T, W.wo, GemmOut{x, H, bo, true});
    rms_norm_rows(P, x, H, ln2_.data() + long(l) * H, T, H, eps, h, H);
  }
  gemm(P, h, T, W.wgu, GemmOut{gu_.data(), 2 * I, nullptr, false});
  if (cfg_.hidden_act == "silu")
    swiglu_rows(P, gu_.data(), 2 * I, T, I, act_.data(), I);
  else
    geglu_rows(P, gu_.data(), 2 * I, T, I, act_.data(), I);
  if (sandwich) {
    gemm(P, act_.data(), T, W.wd, GemmOut{a_.data(), H, nullptr, false});
    rms_norm_rows(P, a_.data(), H, post_ff_.data() + long(l) * H, T, H, eps, h, H);
    add_rows(x, h, T, H);
  } else {
    gemm(P, act_.data(), T, W.wd, GemmOut{x, H, nullptr, true});
  }
}

void CpuForward::run(const StepInput& in, int L, int first_output) {
  const CpuSegment seg{&in, &cache_, L, first_output};
  run(&seg, 1);
}

void CpuForward::run(const CpuSegment* segs, int n) {
  const int H = cfg_.hidden;
  int T = 0, keys = 0;
  for (int s = 0; s < n; ++s) {
    const int Ts = static_cast<int>(segs[s].in->tokens.size());
    LA_CHECK(segs[s].L + Ts <= segs[s].cache->capacity, "CPU forward: step of ", Ts, " on ", segs[s].L,
             " cached rows exceeds the cache (", segs[s].cache->capacity, ")");
    T += Ts;
    keys = std::max(keys, segs[s].L + Ts);
  }
  LA_CHECK(T > 0, "CPU forward: empty step");
  grow(T, keys);
  if (int(att_.size()) < n) att_.resize(n);  // grows to the largest batch seen, never shrinks
  for (int s = 0, row = 0; s < n; ++s) {
    const StepInput& in = *segs[s].in;
    const int Ts = static_cast<int>(in.tokens.size());
    att_[s] = AttentionSegment{KvLayer{}, segs[s].L, row, Ts, in.parents.data(), positions_.data() + row};
    for (int t = 0; t < Ts; ++t) {
      positions_[row + t] = in.positions[t];
      float* xr = x_.data() + long(row + t) * H;
      if (w_.embed_rows) {  // the row as the float copy would hold it: fp32 dequantization rounded to the dtype
        dequantize_row(w_.embed_rows->type, w_.embed_rows->rows[in.tokens[t]], erow_.data(), H);
        for (int i = 0; i < H; ++i) {
          uint32_t bits = 0;
          store_from_f32(&bits, w_.type, 0, erow_[i]);
          xr[i] = load_f32(&bits, w_.type, 0) * embed_scale_;
        }
      } else {
        for (int i = 0; i < H; ++i) xr[i] = load_f32(w_.embed, w_.type, long(in.tokens[t]) * H + i) * embed_scale_;
      }
    }
    row += Ts;
  }
  for (int l = 0; l < cfg_.layers; ++l) layer(l, segs, n, T);
  // The final norm and the LM head over the rows with an output only, packed in step order: a prompt chunk's rows
  // (no next token read) would spend a fifth to two thirds of their forward on logits nobody reads. Each output
  // row's norm and logits are computed as in any other step (row-wise kernels), so the same bits.
  int M = 0;
  for (int s = 0, row = 0; s < n; ++s) {
    const int Ts = static_cast<int>(segs[s].in->tokens.size());
    const int first = std::clamp(segs[s].first_output, 0, Ts);
    for (int t = 0; t < Ts; ++t) logit_row_[row + t] = t < first ? -1 : M++;
    row += Ts;
  }
  for (int r = 0; r < T;) {  // runs of consecutive output rows: one norm call each
    if (logit_row_[r] < 0) {
      ++r;
      continue;
    }
    int e = r + 1;
    while (e < T && logit_row_[e] >= 0) ++e;
    rms_norm_rows(*pool_, x_.data() + long(r) * H, H, norm_.data(), e - r, H, float(cfg_.rms_eps),
                  h_.data() + long(logit_row_[r]) * H, H);
    r = e;
  }
  sketched_ = false;
  if (M == 0) return;
  // Greedy steps whose callers read only the argmax: the sketch names the candidates, a few logits are computed.
  bool argmax_only = w_.head_sketch != nullptr && cfg_.final_softcap <= 0 && M <= w_.head_sketch->max_rows;
  for (int s = 0; s < n && argmax_only; ++s)
    argmax_only = segs[s].argmax_only || segs[s].first_output >= int(segs[s].in->tokens.size());
  if (argmax_only) {
    if (best_.size() < size_t(M)) best_.resize(M);  // at most max_rows (a few): grows a few times, once each
    if (sketch_argmax(*pool_, *w_.head_sketch, w_.lm_head, h_.data(), M, best_.data(), sketch_scratch_)) {
      sketched_ = true;
      return;
    }
  }
  // Sized by the output rows, not the step's: a 400-row prompt chunk would otherwise hold 400 rows of logits (on
  // Gemma-3's 262k vocabulary 420 MB, faulted in page by page) that no row writes. Grows to the most output rows
  // seen (a draft step's) by half again at least, never shrinks: steady steps allocate nothing, and a batch whose
  // drafts grow a row at a time reallocates a few times, not once per row.
  const size_t V = cfg_.vocab;
  if (logits_.size() < M * V) {
    const size_t rows = std::max<size_t>(M, logits_.size() / V * 3 / 2);
    logits_.clear();  // nothing to keep: no copy of the old rows
    logits_.resize(rows * V);
  }
  gemm(*pool_, h_.data(), M, w_.lm_head, GemmOut{logits_.data(), cfg_.vocab, nullptr, false});
  if (cfg_.final_softcap > 0) softcap_rows(*pool_, logits_.data(), cfg_.vocab, M, cfg_.vocab, float(cfg_.final_softcap));
}

const float* CpuForward::logits_row(int row) const {
  LA_CHECK(!sketched_, "internal: logits of a step whose argmax came from the head's sketch");
  const int c = logit_row_[row];
  return c < 0 ? nullptr : logits_.data() + long(c) * cfg_.vocab;
}

void CpuForward::argmax(int T, int32_t* out, int row0) const {
  const int V = cfg_.vocab;
  if (sketched_) {
    for (int t = 0; t < T; ++t) {
      const int c = logit_row_[row0 + t];
      out[t] = c < 0 ? -1 : best_[c];
    }
    return;
  }
  for (int t = 0; t < T; ++t) {
    const float* r = logits_row(row0 + t);
    if (!r) {
      out[t] = -1;
      continue;
    }
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
      auto* k = static_cast<char*>(cache_.k[l]);
      auto* v = static_cast<char*>(cache_.v[l]);
      std::memmove(k + (L + j) * row, k + (L + idx[j]) * row, row);
      std::memmove(v + (L + j) * row, v + (L + idx[j]) * row, row);
    }
}

}  // namespace la
