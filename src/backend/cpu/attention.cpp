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
// dot(q, k_i) for 4 keys at once, each in gemm.h's dot_f32 order (4 independent chains instead of one).
template <WType WT>
LA_AVX2 void dot4_avx2(const float* q, const void* k, const long* off, int D, float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const int D8 = D & ~7;
  for (int d = 0; d < D8; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    a0 = _mm256_fmadd_ps(wload_avx2<WT>(k, off[0] + d), qv, a0);
    a1 = _mm256_fmadd_ps(wload_avx2<WT>(k, off[1] + d), qv, a1);
    a2 = _mm256_fmadd_ps(wload_avx2<WT>(k, off[2] + d), qv, a2);
    a3 = _mm256_fmadd_ps(wload_avx2<WT>(k, off[3] + d), qv, a3);
  }
  const __m256 acc[4] = {a0, a1, a2, a3};
  for (int i = 0; i < 4; ++i) {
    float s = fold_avx2(acc[i]);
    for (int d = D8; d < D; ++d) s = std::fma(load_f32(k, WT, off[i] + d), q[d], s);
    out[i] = s;
  }
}
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

// All query heads of K/V head kh for one token (off: scratch for the S key offsets).
template <WType WT>
void attend(const AttentionShape& s, const float* q, const KvLayer& kv, const KeyList& keys, int kh, float* scores,
            long* off, float* out, bool avx2) {
  const int D = s.head_dim, g = s.heads / s.kv_heads, S = keys.count();
  const long stride = long(s.kv_heads) * D;
  for (int j = 0; j < S; ++j) off[j] = keys.row(j) * stride + long(kh) * D;
  for (int h = 0; h < g; ++h) {
    const float* qh = q + long(kh * g + h) * D;
    float* sc = scores + long(h) * S;
    int j = 0;
#if defined(__x86_64__)
    if (avx2) {
      for (; j + 4 <= S; j += 4) {
        dot4_avx2<WT>(qh, kv.k, off + j, D, sc + j);
        for (int i = 0; i < 4; ++i) sc[j + i] *= s.scale;
      }
      for (; j < S; ++j) sc[j] = dot_avx2<WT>(qh, kv.k, off[j], D) * s.scale;
    }
#endif
    for (; j < S; ++j) sc[j] = dot_portable(qh, kv.k, WT, off[j], D) * s.scale;
    if (s.softcap > 0.f)  // Gemma-2: after the scaling, before the max (transformers' order)
      for (int i = 0; i < S; ++i) sc[i] = std::tanh(sc[i] / s.softcap) * s.softcap;
  }
  for (int h = 0; h < g; ++h) {
    float* sc = scores + long(h) * S;
    float m = -INFINITY;
    for (int j = 0; j < S; ++j) m = std::max(m, sc[j]);
    int j = 0;
#if defined(__x86_64__)
    if (avx2) j = exp_shifted_avx2(sc, S, m);
#endif
    for (; j < S; ++j) sc[j] = expf_lanes(sc[j] - m);
    float sum = 0.f;
    for (int i = 0; i < S; ++i) sum += sc[i];
    float* o = out + long(kh * g + h) * D;
#if defined(__x86_64__)
    if (avx2) {
      weighted_sum_avx2<WT>(sc, kv.v, off, S, D, o);
    } else
#endif
    {
      std::fill(o, o + D, 0.f);
      for (int j = 0; j < S; ++j) axpy_portable(sc[j], kv.v, WT, off[j], D, o);
    }
    for (int d = 0; d < D; ++d) o[d] /= sum;
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
  const bool avx2 = cpu_isa() == CpuIsa::Avx2;
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
