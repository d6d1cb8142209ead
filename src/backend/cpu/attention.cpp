// CPU step attention (the order it keeps, and why: include/lookahead/backend/cpu/attention.h). Both ISA paths share the
// loop structure; the dot products are gemm.h's dot_f32 order, the weighted sums fma over keys in order.
#include "lookahead/backend/cpu/attention.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cmath>
#include <cstring>

#include "lookahead/backend/cpu/gemm.h"
#include "lookahead/backend/cpu/isa.h"
#include "lookahead/backend/cpu/thread_pool.h"
#include "lookahead/util/error.h"

#include "avx2_lanes.h"
#include "expf_lanes.h"

namespace la {
namespace {

// The cache row (absolute index) of key j of token t: cache rows first .. L-1, then t's kept ancestors root first.
struct KeyList {
  int L = 0;
  int first = 0;                  // first cache row kept (0 without a window)
  const int32_t* path = nullptr;  // step indices, root first
  int depth = 0;                  // kept path length (t included)
  int count() const { return L - first + depth; }
  int row(int j) const { return j < L - first ? first + j : L + path[j - (L - first)]; }
};

// v * p accumulated into acc[0..D) (fma per element, in call order) for the portable path.
void axpy_portable(float p, const void* v, WType t, long off, int D, float* acc) {
  for (int d = 0; d < D; ++d) acc[d] = std::fma(p, load_f32(v, t, off + d), acc[d]);
}

#if defined(__x86_64__)
template <WType WT>
LA_AVX2 float dot_avx2(const float* q, const void* k, long off, int D) {
  __m256 acc = _mm256_setzero_ps();
  const int D8 = D & ~7;
  for (int d = 0; d < D8; d += 8) acc = _mm256_fmadd_ps(wload_avx2<WT>(k, off + d), _mm256_loadu_ps(q + d), acc);
  float s = fold_avx2(acc);
  for (int d = D8; d < D; ++d) s = std::fma(load_f32(k, WT, off + d), q[d], s);
  return s;
}
// sc[j] = exp(sc[j] - m) for the whole 8-lane groups (the same bits as expf_lanes per element); returns how far.
LA_AVX2 inline int exp_shifted_avx2(float* sc, int S, float m) {
  const __m256 mv = _mm256_set1_ps(m);
  int j = 0;
  for (; j + 8 <= S; j += 8) _mm256_storeu_ps(sc + j, expf_lanes_avx2(_mm256_sub_ps(_mm256_loadu_ps(sc + j), mv)));
  return j;
}
// out[d] = fma over keys j in order of p_j * v_j[d], from zero: 64 lanes at a time held in 8 registers across
// the keys (the same chain per element as one fma per key into memory).
template <WType WT>
LA_AVX2 void weighted_sum_avx2(const float* p, const void* v, const long* off, int S, int D, float* out) {
  const int D8 = D & ~7;
  int d0 = 0;
  for (; d0 + 64 <= D8; d0 += 64) {
    __m256 a[8];
    for (int b = 0; b < 8; ++b) a[b] = _mm256_setzero_ps();
    for (int j = 0; j < S; ++j) {
      const __m256 pv = _mm256_set1_ps(p[j]);
      for (int b = 0; b < 8; ++b) a[b] = _mm256_fmadd_ps(pv, wload_avx2<WT>(v, off[j] + d0 + 8 * b), a[b]);
    }
    for (int b = 0; b < 8; ++b) _mm256_storeu_ps(out + d0 + 8 * b, a[b]);
  }
  for (; d0 < D8; d0 += 8) {
    __m256 a = _mm256_setzero_ps();
    for (int j = 0; j < S; ++j) a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), wload_avx2<WT>(v, off[j] + d0), a);
    _mm256_storeu_ps(out + d0, a);
  }
  for (int d = D8; d < D; ++d) {
    float a = 0.f;
    for (int j = 0; j < S; ++j) a = std::fma(p[j], load_f32(v, WT, off[j] + d), a);
    out[d] = a;
  }
}
// The K and V rows of the keys kAhead positions on are asked for while the current ones compute (dot4_heads_avx2).
// In a batch the slots' caches come from memory (SmolLM2 at --batch 16: 16 caches of up to 30 x 260 rows x 1.5 KB)
// and a K/V head's rows lie kv_heads x D apart; with the heads grouped (below) each row gets three times the
// arithmetic per load, fewer loads were in flight, and a HumanEval x 64 job at --batch 16 ran 0.92-0.96x the build
// with one head at a time (attention 11.0% -> 14.8% of the samples) until these prefetches: 1.00-1.04x.
constexpr int kAhead = 8;
template <WType WT>
LA_AVX2 inline void prefetch_span(const void* base, long elem, int n) {
  const char* at = static_cast<const char*>(base) + elem * long(wtype_size(WT));
  for (int b = 0; b < n * int(wtype_size(WT)); b += 64) __builtin_prefetch(at + b, 0, 3);
}
template <WType WT>
LA_AVX2 inline void prefetch_rows(const void* base, const long* off, int n, int D) {
  for (int i = 0; i < n; ++i) prefetch_span<WT>(base, off[i], D);
}
// The G query heads of one K/V head (grouped-query attention) read the same keys and values, so these two load
// each K and V vector once for all G heads. dot4_heads_avx2: dot(q_h, k_i) for G heads and 4 keys, 4G independent
// chains, each in gemm.h's dot_f32 order (8 lanes over d in order, the fixed fold, the tail by fma);
// weighted_sum_heads_avx2: each output element's chain is weighted_sum_avx2's (fma over the keys in order, from
// zero). So a head's bits are those of computing it alone, whatever G. G <= 3 keeps the chains and operands in the
// 16 registers (4G accumulators, G query or weight vectors, the loaded one). Before, each head read K and V on its
// own: at 32 rows and a 256-row cache that attention was a sixth of SmolLM2's step (9 heads on 3 K/V heads), and
// 12% after (`perf record` of bench-forward, the 2-core EPYC, 2026-11-28).
template <WType WT, int G>
LA_AVX2 void dot4_heads_avx2(const float* const* q, const void* k, const long* off, int D, float* const* out,
                             const void* v, const long* ahead, int n_ahead) {
  prefetch_rows<WT>(k, ahead, n_ahead, D);
  prefetch_rows<WT>(v, ahead, n_ahead, D);
  __m256 a[G][4];
  for (int h = 0; h < G; ++h)
    for (int i = 0; i < 4; ++i) a[h][i] = _mm256_setzero_ps();
  const int D8 = D & ~7;
  for (int d = 0; d < D8; d += 8) {
    __m256 qv[G];
    for (int h = 0; h < G; ++h) qv[h] = _mm256_loadu_ps(q[h] + d);
    for (int i = 0; i < 4; ++i) {
      const __m256 kv = wload_avx2<WT>(k, off[i] + d);
      for (int h = 0; h < G; ++h) a[h][i] = _mm256_fmadd_ps(kv, qv[h], a[h][i]);
    }
  }
  for (int h = 0; h < G; ++h)
    for (int i = 0; i < 4; ++i) {
      float s = fold_avx2(a[h][i]);
      for (int d = D8; d < D; ++d) s = std::fma(load_f32(k, WT, off[i] + d), q[h][d], s);
      out[h][i] = s;
    }
}
// D % 32 == 0: 32 lanes of the G heads per pass over the keys.
template <WType WT, int G>
LA_AVX2 void weighted_sum_heads_avx2(const float* const* p, const void* v, const long* off, int S, int D,
                                     float* const* out) {
  for (int d0 = 0; d0 < D; d0 += 32) {
    __m256 a[G][4];
    for (int h = 0; h < G; ++h)
      for (int b = 0; b < 4; ++b) a[h][b] = _mm256_setzero_ps();
    for (int j = 0; j < S; ++j) {
      __m256 pv[G];
      for (int h = 0; h < G; ++h) pv[h] = _mm256_set1_ps(p[h][j]);
      for (int b = 0; b < 4; ++b) {
        const __m256 vv = wload_avx2<WT>(v, off[j] + d0 + 8 * b);
        for (int h = 0; h < G; ++h) a[h][b] = _mm256_fmadd_ps(pv[h], vv, a[h][b]);
      }
    }
    for (int h = 0; h < G; ++h)
      for (int b = 0; b < 4; ++b) _mm256_storeu_ps(out[h] + d0 + 8 * b, a[h][b]);
  }
}
template <WType WT>
LA_AVX2 void dot4_heads(int G, const float* const* q, const void* k, const long* off, int D, float* const* out,
                        const void* v, const long* ahead, int n_ahead) {
  if (G == 3) return dot4_heads_avx2<WT, 3>(q, k, off, D, out, v, ahead, n_ahead);
  if (G == 2) return dot4_heads_avx2<WT, 2>(q, k, off, D, out, v, ahead, n_ahead);
  dot4_heads_avx2<WT, 1>(q, k, off, D, out, v, ahead, n_ahead);
}
// G = 2 or 3 (one head alone: weighted_sum_avx2).
template <WType WT>
LA_AVX2 void weighted_sum_heads(int G, const float* const* p, const void* v, const long* off, int S, int D,
                                float* const* out) {
  if (G == 3) return weighted_sum_heads_avx2<WT, 3>(p, v, off, S, D, out);
  weighted_sum_heads_avx2<WT, 2>(p, v, off, S, D, out);
}
#endif

float dot_portable(const float* q, const void* k, WType t, long off, int D) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int D8 = D & ~7;
  for (int d = 0; d < D8; d += 8)
    for (int l = 0; l < 8; ++l) lanes[l] = std::fma(load_f32(k, t, off + d + l), q[d + l], lanes[l]);
  float s = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  for (int d = D8; d < D; ++d) s = std::fma(load_f32(k, t, off + d), q[d], s);
  return s;
}

// All query heads of K/V head kh for one token (off: scratch for the S key offsets). On the AVX2 path the heads go
// in groups of up to kHeadGroup, each group's scores and weighted sums reading K and V once (above).
constexpr int kHeadGroup = 3;

template <WType WT>
void attend(const AttentionShape& s, const float* q, const KvLayer& kv, const KeyList& keys, int kh, float* scores,
            long* off, float* out, bool avx2) {
  const int D = s.head_dim, g = s.heads / s.kv_heads, S = keys.count();
  const long stride = long(s.kv_heads) * D;
  for (int j = 0; j < S; ++j) off[j] = keys.row(j) * stride + long(kh) * D;
  for (int h0 = 0; h0 < g; h0 += kHeadGroup) {
    const int G = std::min(kHeadGroup, g - h0);
    const float* qh[kHeadGroup];
    float* sc[kHeadGroup];
    for (int h = 0; h < G; ++h) {
      qh[h] = q + long(kh * g + h0 + h) * D;
      sc[h] = scores + long(h0 + h) * S;
    }
    int j0 = 0;
#if defined(__x86_64__)
    if (avx2) {
      float* at[kHeadGroup];
      for (; j0 + 4 <= S; j0 += 4) {
        for (int h = 0; h < G; ++h) at[h] = sc[h] + j0;
        const int ah = h0 > 0 ? 0 : std::clamp(S - (j0 + kAhead), 0, 4);  // the first group fetched them
        dot4_heads<WT>(G, qh, kv.k, off + j0, D, at, kv.v, off + j0 + kAhead, ah);
      }
      for (int h = 0; h < G; ++h)
        for (int j = j0; j < S; ++j) sc[h][j] = dot_avx2<WT>(qh[h], kv.k, off[j], D);
      j0 = S;
    }
#endif
    for (int h = 0; h < G; ++h)
      for (int j = j0; j < S; ++j) sc[h][j] = dot_portable(qh[h], kv.k, WT, off[j], D);
    for (int h = 0; h < G; ++h) {
      for (int j = 0; j < S; ++j) sc[h][j] *= s.scale;
      if (s.softcap > 0.f)  // Gemma-2: after the scaling, before the max (transformers' order)
        for (int j = 0; j < S; ++j) sc[h][j] = std::tanh(sc[h][j] / s.softcap) * s.softcap;
    }
    float sum[kHeadGroup];
    for (int h = 0; h < G; ++h) {
      float m = -INFINITY;
      for (int j = 0; j < S; ++j) m = std::max(m, sc[h][j]);
      int j = 0;
#if defined(__x86_64__)
      if (avx2) j = exp_shifted_avx2(sc[h], S, m);
#endif
      for (; j < S; ++j) sc[h][j] = expf_lanes(sc[h][j] - m);
      sum[h] = 0.f;
      for (int i = 0; i < S; ++i) sum[h] += sc[h][i];
    }
    float* o[kHeadGroup];
    for (int h = 0; h < G; ++h) o[h] = out + long(kh * g + h0 + h) * D;
#if defined(__x86_64__)
    if (avx2 && G > 1 && D % 32 == 0) {
      weighted_sum_heads<WT>(G, sc, kv.v, off, S, D, o);
    } else if (avx2) {
      for (int h = 0; h < G; ++h) weighted_sum_avx2<WT>(sc[h], kv.v, off, S, D, o[h]);
    } else
#endif
    {
      for (int h = 0; h < G; ++h) {
        std::fill(o[h], o[h] + D, 0.f);
        for (int j = 0; j < S; ++j) axpy_portable(sc[h][j], kv.v, WT, off[j], D, o[h]);
      }
    }
    for (int h = 0; h < G; ++h)
      for (int d = 0; d < D; ++d) o[h][d] /= sum[h];
  }
}

using AttendFn = void (*)(const AttentionShape&, const float*, const KvLayer&, const KeyList&, int, float*, long*,
                          float*, bool);
AttendFn attend_for(WType t) {
  return t == WType::F32 ? &attend<WType::F32> : t == WType::BF16 ? &attend<WType::BF16> : &attend<WType::F16>;
}

}  // namespace

void AttentionScratch::reserve(int threads, int group, int max_keys) {
  if (int(per_thread.size()) < threads) per_thread.resize(threads);
  const size_t need = size_t(group) * max_keys + size_t(max_keys) * 3;  // key offsets (2 floats each), scores, the path
  for (auto& v : per_thread)
    if (v.size() < need) v.resize(need);
}

void step_attention(ThreadPool& pool, AttentionScratch& scratch, const AttentionShape& s, const float* q, int ldq,
                    const KvLayer& kv, int L, const int32_t* parents, int T, float* out, int ldo,
                    const int32_t* positions) {
  const AttentionSegment seg{kv, L, 0, T, parents, positions};
  step_attention(pool, scratch, s, q, ldq, &seg, 1, out, ldo);
}

void step_attention(ThreadPool& pool, AttentionScratch& scratch, const AttentionShape& s, const float* q, int ldq,
                    const AttentionSegment* segs, int nseg, float* out, int ldo) {
  const bool avx2 = cpu_avx2();
  const int g = s.heads / s.kv_heads;
  int items = 0, max_keys = 0;
  for (int i = 0; i < nseg; ++i) {
    LA_CHECK(s.window <= 0 || segs[i].positions != nullptr, "step attention: a sliding window needs the step's positions");
    items += segs[i].T * s.kv_heads;
    max_keys = std::max(max_keys, segs[i].L + segs[i].T);
  }
  // Work items are (segment, token, K/V head) in that order, split statically over the participants; each is
  // computed by one participant alone, reading only its own segment's cache and ancestors.
  auto part = [&](int i, int n) {
    float* base = scratch.per_thread[i].data();  // [key offsets (8-byte) | scores | path]
    static_assert(sizeof(long) <= 2 * sizeof(float), "a key offset takes two floats of scratch");
    long* off = reinterpret_cast<long*>(base);
    float* scores = base + size_t(2) * max_keys;
    int32_t* path = reinterpret_cast<int32_t*>(scores + size_t(g) * max_keys);
    const int begin = int(int64_t(items) * i / n), end = int(int64_t(items) * (i + 1) / n);
    int si = 0, seg_first = 0;  // the segment holding item `it`, and its first item
    int last_t = -1;
    KeyList keys;
    for (int it = begin; it < end; ++it) {
      while (it >= seg_first + segs[si].T * s.kv_heads) {
        seg_first += segs[si].T * s.kv_heads;
        ++si;
        last_t = -1;
      }
      const AttentionSegment& sg = segs[si];
      const int t = (it - seg_first) / s.kv_heads, kh = (it - seg_first) % s.kv_heads;
      if (t != last_t) {  // t's ancestors (inside its window), root first
        const int32_t* positions = sg.positions;
        const int32_t* parents = sg.parents;
        const int lo = s.window > 0 ? positions[t] - s.window : INT32_MIN;  // keys at positions <= lo are hidden
        auto kept = [&](int a) { return s.window <= 0 || positions[a] > lo; };
        int depth = 0;
        for (int a = t; a >= 0; a = parents[a]) depth += kept(a);
        int k = depth;
        for (int a = t; a >= 0; a = parents[a])
          if (kept(a)) path[--k] = a;
        const int first = s.window > 0 ? std::min(sg.L, std::max(0, lo + 1)) : 0;
        keys = KeyList{sg.L, first, path, depth};
        last_t = t;
      }
      attend_for(sg.kv.type)(s, q + long(sg.row0 + t) * ldq, sg.kv, keys, kh, scores, off,
                             out + long(sg.row0 + t) * ldo, avx2);
    }
  };
  if (pool.size() == 1 || items == 1) {
    part(0, 1);
  } else {
    pool.run(part);
  }
}

}  // namespace la
