// CPU step attention (the order it keeps, and why: include/lookahead/cpu/attention.h). Both ISA paths share the
// loop structure; the dot products are gemm.h's dot_f32 order, the weighted sums fma over keys in order.
#include "lookahead/cpu/attention.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cmath>
#include <cstring>

#include "lookahead/cpu/gemm.h"
#include "lookahead/cpu/isa.h"
#include "lookahead/cpu/thread_pool.h"
#include "lookahead/util/error.h"

#include "avx2_lanes.h"

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
// dot(q, k) in gemm.h's order, k widened from the cache type.
LA_AVX2 float dot_avx2(const float* q, const void* k, WType t, long off, int D) {
  __m256 acc = _mm256_setzero_ps();
  const int D8 = D & ~7;
  for (int d = 0; d < D8; d += 8) acc = _mm256_fmadd_ps(load8_avx2(k, t, off + d), _mm256_loadu_ps(q + d), acc);
  float s = fold_avx2(acc);
  for (int d = D8; d < D; ++d) s = std::fma(load_f32(k, t, off + d), q[d], s);
  return s;
}
LA_AVX2 void axpy_avx2(float p, const void* v, WType t, long off, int D, float* acc) {
  const __m256 pv = _mm256_set1_ps(p);
  const int D8 = D & ~7;
  for (int d = 0; d < D8; d += 8)
    _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(pv, load8_avx2(v, t, off + d), _mm256_loadu_ps(acc + d)));
  for (int d = D8; d < D; ++d) acc[d] = std::fma(p, load_f32(v, t, off + d), acc[d]);
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

// All query heads of K/V head kh for one token.
void attend(const AttentionShape& s, const float* q, const KvLayer& kv, const KeyList& keys, int kh, float* scores,
            float* out, bool avx2) {
  const int D = s.head_dim, g = s.heads / s.kv_heads, S = keys.count();
  const long stride = long(s.kv_heads) * D;
  for (int j = 0; j < S; ++j) {
    const long off = keys.row(j) * stride + long(kh) * D;
    for (int h = 0; h < g; ++h) {
      const float* qh = q + long(kh * g + h) * D;
#if defined(__x86_64__)
      const float d = avx2 ? dot_avx2(qh, kv.k, kv.type, off, D) : dot_portable(qh, kv.k, kv.type, off, D);
#else
      const float d = dot_portable(qh, kv.k, kv.type, off, D);
#endif
      const float sc = d * s.scale;
      scores[long(h) * S + j] = s.softcap > 0.f ? std::tanh(sc / s.softcap) * s.softcap : sc;
    }
  }
  for (int h = 0; h < g; ++h) {
    float* sc = scores + long(h) * S;
    float m = -INFINITY;
    for (int j = 0; j < S; ++j) m = std::max(m, sc[j]);
    float sum = 0.f;
    for (int j = 0; j < S; ++j) {
      sc[j] = std::exp(sc[j] - m);
      sum += sc[j];
    }
    float* o = out + long(kh * g + h) * D;
    std::fill(o, o + D, 0.f);
    for (int j = 0; j < S; ++j) {
      const long off = keys.row(j) * stride + long(kh) * D;
#if defined(__x86_64__)
      if (avx2) {
        axpy_avx2(sc[j], kv.v, kv.type, off, D, o);
        continue;
      }
#endif
      axpy_portable(sc[j], kv.v, kv.type, off, D, o);
    }
    for (int d = 0; d < D; ++d) o[d] /= sum;
  }
}

}  // namespace

void AttentionScratch::reserve(int threads, int group, int max_keys) {
  if (int(per_thread.size()) < threads) per_thread.resize(threads);
  const size_t need = size_t(group) * max_keys + size_t(max_keys);  // scores, then the path
  for (auto& v : per_thread)
    if (v.size() < need) v.resize(need);
}

void step_attention(ThreadPool& pool, AttentionScratch& scratch, const AttentionShape& s, const float* q, int ldq,
                    const KvLayer& kv, int L, const int32_t* parents, int T, float* out, int ldo,
                    const int32_t* positions) {
  LA_CHECK(s.window <= 0 || positions != nullptr, "step attention: a sliding window needs the step's positions");
  const bool avx2 = cpu_isa() == CpuIsa::Avx2;
  const int items = T * s.kv_heads, g = s.heads / s.kv_heads;
  auto part = [&](int i, int n) {
    float* scores = scratch.per_thread[i].data();
    int32_t* path = reinterpret_cast<int32_t*>(scores + size_t(g) * (L + T));
    int last_t = -1;
    KeyList keys;
    for (int it = int(int64_t(items) * i / n); it < int(int64_t(items) * (i + 1) / n); ++it) {
      const int t = it / s.kv_heads, kh = it % s.kv_heads;
      if (t != last_t) {  // t's ancestors (inside its window), root first
        const int lo = s.window > 0 ? positions[t] - s.window : INT32_MIN;  // keys at positions <= lo are hidden
        auto kept = [&](int a) { return s.window <= 0 || positions[a] > lo; };
        int depth = 0;
        for (int a = t; a >= 0; a = parents[a]) depth += kept(a);
        int k = depth;
        for (int a = t; a >= 0; a = parents[a])
          if (kept(a)) path[--k] = a;
        const int first = s.window > 0 ? std::min(L, std::max(0, lo + 1)) : 0;
        keys = KeyList{L, first, path, depth};
        last_t = t;
      }
      attend(s, q + long(t) * ldq, kv, keys, kh, scores, out + long(t) * ldo, avx2);
    }
  };
  if (pool.size() == 1 || items == 1) {
    part(0, 1);
  } else {
    pool.run(part);
  }
}

}  // namespace la
