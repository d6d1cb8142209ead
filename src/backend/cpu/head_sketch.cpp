// The sketched greedy head (why it is exact, and the bound: include/lookahead/backend/cpu/head_sketch.h).
//
// Two passes over the vocabulary rows, each split over the pool by contiguous ranges: pass 1 computes a[n] and
// B[n] for every token row and each participant's best lower bound; pass 2, with the overall best lower bound,
// computes the candidates' logits exactly and keeps each participant's first maximum; the participants' answers
// are merged in range order, which is the sequential scan's rule.
#include "lookahead/backend/cpu/head_sketch.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "lookahead/backend/cpu/isa.h"
#include "lookahead/backend/cpu/thread_pool.h"
#include "lookahead/model/dtype.h"
#include "lookahead/util/error.h"

#include "avx2_lanes.h"

namespace la {
namespace {

constexpr int kGroup = 32;
constexpr double kU = 0x1p-24;

double gamma_of(int j) { return j * kU / (1 - j * kU); }

// Round half away from zero, as std::lround, clamped to the code range.
inline int code_of(float v) { return int(std::clamp(std::lround(v), -127L, 127L)); }

// Quantizes token row x (K) into q (codes), t (group scales) and m (group maxima, padded with zeros); false when x is
// not finite.
bool quantize_row(const float* x, int K, int G, int gpad, int8_t* q, float* t, float* m) {
  for (int g = 0; g < G; ++g) {
    float mx = 0;
    for (int k = 0; k < kGroup; ++k) {
      const float v = std::fabs(x[g * kGroup + k]);
      if (!std::isfinite(v)) return false;  // (std::max would drop a NaN)
      mx = std::max(mx, v);
    }
    m[g] = mx;
    t[g] = mx / 127.f;
    for (int k = 0; k < kGroup; ++k) {
      q[g * kGroup + k] = int8_t(t[g] > 0 ? code_of(x[g * kGroup + k] / t[g]) : 0);
      q[K + g * kGroup + k] = int8_t(std::abs(q[g * kGroup + k]));  // |q| (the AVX2 path's unsigned operand)
    }
  }
  for (int g = G; g < gpad; ++g) m[g] = 0;
  return true;
}

// a = sum_g s[g] t[g] I[g] and B = sum_g m[g] beta[g] for one vocabulary row and one token row.
inline void row_bounds_portable(const int8_t* c, const float* s, const float* beta, const int8_t* q, const float* t,
                                const float* m, int G, int gpad, float& a, float& b) {
  float acc = 0, bb = 0;
  for (int g = 0; g < G; ++g) {
    int32_t I = 0;
    for (int k = 0; k < kGroup; ++k) I += int32_t(c[g * kGroup + k]) * int32_t(q[g * kGroup + k]);
    acc = std::fma(s[g] * t[g], float(I), acc);
  }
  for (int g = 0; g < gpad; ++g) bb = std::fma(m[g], beta[g], bb);
  a = acc;
  b = bb;
}

#if defined(__x86_64__)
// The same with 32 codes per instruction group: sign(q) moved onto the codes, |q| x codes by maddubs (pairs: at
// most 2 x 127 x 127 < 2^15, no saturation), pairs of pairs by madd, converted (exact: < 2^24) and scaled per lane.
LA_AVX2 inline __attribute__((always_inline)) void row_bounds_avx2(const int8_t* c, const float* s, const float* beta,
                                                                  const int8_t* q, const float* t, const float* m,
                                                                  int G, int gpad, float& a, float& b) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int g = 0; g < G; ++g) {
    const __m256i cv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + g * kGroup));
    const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + g * kGroup));
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + G * kGroup + g * kGroup));  // |q|
    const __m256i prod = _mm256_maddubs_epi16(qa, _mm256_sign_epi8(cv, qv));
    const __m256 part = _mm256_cvtepi32_ps(_mm256_madd_epi16(prod, ones));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(s[g] * t[g]), part, acc);
  }
  __m256 bb = _mm256_setzero_ps();
  for (int g = 0; g < gpad; g += 8) bb = _mm256_fmadd_ps(_mm256_loadu_ps(m + g), _mm256_loadu_ps(beta + g), bb);
  a = fold_avx2(acc);
  b = fold_avx2(bb);
}
#endif

// Covers the double rounding of a +- b (at most 2^-53 of |a| + b each).
inline double slack(float a, float b) { return (std::fabs(double(a)) + double(b)) * 0x1p-50; }

// Pass 1 over rows r0 .. r1-1 for every token row: a and B into the scratch, this participant's best lower bound
// into lo[t], stored only when it improves (no store-to-load chain from row to row). One body per ISA path, so
// that the AVX2 row kernel inlines.
#define LA_SKETCH_BOUNDS_BODY(ROW_BOUNDS)                                                                        \
  const int K = s.cols, G = s.groups, GP = s.gpad, V = s.rows;                                                   \
  for (int t = 0; t < M; ++t) lo[t] = -INFINITY;                                                                 \
  for (int r = r0; r < r1; ++r) {                                                                                \
    const int8_t* c = s.codes.data() + size_t(r) * K;                                                             \
    const float* sr = s.scale.data() + size_t(r) * G;                                                             \
    const float* br = s.beta.data() + size_t(r) * GP;                                                             \
    const bool always = s.always[size_t(r)] != 0;                                                                 \
    for (int t = 0; t < M; ++t) {                                                                                 \
      float a = 0, b = INFINITY;                                                                                  \
      if (!always) {                                                                                              \
        ROW_BOUNDS(c, sr, br, sc.q.data() + size_t(t) * 2 * K, sc.t.data() + size_t(t) * G, sc.m.data() + size_t(t) * GP, \
                   G, GP, a, b);                                                                                  \
        const double l = double(a) - double(b) - slack(a, b);                                                     \
        if (l > lo[t]) lo[t] = l;                                                                                 \
      }                                                                                                           \
      sc.a[size_t(t) * V + r] = a;                                                                                \
      sc.b[size_t(t) * V + r] = b;                                                                                \
    }                                                                                                             \
  }

void bounds_range_portable(const HeadSketch& s, SketchScratch& sc, int M, int r0, int r1, double* lo) {
  LA_SKETCH_BOUNDS_BODY(row_bounds_portable)
}
#if defined(__x86_64__)
LA_AVX2 void bounds_range_avx2(const HeadSketch& s, SketchScratch& sc, int M, int r0, int r1, double* lo) {
  LA_SKETCH_BOUNDS_BODY(row_bounds_avx2)
}
#endif
#undef LA_SKETCH_BOUNDS_BODY

// The GEMM's combination of two answers, the first from lower rows: first NaN, else the first maximum.
void merge(int32_t& i, float& v, int32_t j, float w) {
  if (j < 0) return;
  if (i < 0 || (!std::isnan(v) && (std::isnan(w) || w > v))) {
    i = j;
    v = w;
  }
}

}  // namespace

bool head_sketch_supports(const PackedWeight& w) {
  return !w.quantized && w.data != nullptr && w.cols > 0 && w.cols % kGroup == 0 && w.cols < 25600 &&
         (w.type == WType::F32 || w.type == WType::BF16 || w.type == WType::F16);
}

HeadSketch build_head_sketch(ThreadPool& pool, const PackedWeight& w) {
  LA_CHECK(head_sketch_supports(w), "internal: build_head_sketch on an unsupported head");
  HeadSketch s;
  s.rows = w.rows;
  s.cols = w.cols;
  s.groups = w.cols / kGroup;
  s.gpad = (s.groups + 7) / 8 * 8;
  s.max_rows = w.type == WType::F32 ? 4 : 2;  // where it pays (head_sketch.h)
  const int K = s.cols, G = s.groups;
  s.codes.assign(size_t(s.rows) * K, 0);
  s.scale.assign(size_t(s.rows) * G, 0.f);
  s.beta.assign(size_t(s.rows) * s.gpad, 0.f);
  s.always.assign(size_t(s.rows), 0);
  const double gK = gamma_of(K), gA = gamma_of(G + 8);
  std::vector<double> l1(size_t(s.rows), 0.0);
  auto part = [&](int i, int n) {
    std::vector<float> row(static_cast<size_t>(K));
    const int r0 = int(int64_t(s.rows) * i / n), r1 = int(int64_t(s.rows) * (i + 1) / n);
    for (int r = r0; r < r1; ++r) {
      bool finite = true;
      for (int k = 0; k < K; ++k) {
        row[size_t(k)] = packed_at(w, r, k);
        finite = finite && std::isfinite(row[size_t(k)]);
      }
      if (!finite) {
        s.always[size_t(r)] = 1;
        continue;
      }
      for (int g = 0; g < G; ++g) {
        const float* wg = row.data() + g * kGroup;
        float mx = 0;
        for (int k = 0; k < kGroup; ++k) mx = std::max(mx, std::fabs(wg[k]));
        const float sc = mx / 127.f;
        int8_t* cg = s.codes.data() + size_t(r) * K + g * kGroup;
        double E = 0, L1p = 0, L1 = 0;
        for (int k = 0; k < kGroup; ++k) {
          cg[k] = int8_t(sc > 0 ? code_of(wg[k] / sc) : 0);
          const double ws = double(sc) * double(cg[k]);
          E += std::fabs(double(wg[k]) - ws);
          L1p += std::fabs(ws);
          L1 += std::fabs(double(wg[k]));
        }
        s.scale[size_t(r) * G + g] = sc;
        const double beta = (E + L1p * (0.5001 / 127 + gA * 1.01) + gK * L1) * (1 + 1e-4);
        s.beta[size_t(r) * s.gpad + g] = std::nextafter(float(beta), FLT_MAX);  // rounded up
        l1[size_t(r)] += L1;
      }
    }
  };
  pool.run(part);
  for (int r = 0; r < s.rows; ++r)
    if (!s.always[size_t(r)]) s.max_l1 = std::max(s.max_l1, l1[size_t(r)]);
  return s;
}

bool sketch_argmax(ThreadPool& pool, const HeadSketch& s, const PackedWeight& w, const float* x, int M, int32_t* out,
                   SketchScratch& sc) {
  const int V = s.rows, K = s.cols, G = s.groups, GP = s.gpad, P = pool.size();
  const size_t MV = size_t(M) * V;
  if (sc.a.size() < MV) {
    sc.a.resize(MV);
    sc.b.resize(MV);
  }
  if (sc.q.size() < size_t(M) * 2 * K) sc.q.resize(size_t(M) * 2 * K);
  if (sc.m.size() < size_t(M) * GP) {
    sc.m.resize(size_t(M) * GP);
    sc.t.resize(size_t(M) * G);
  }
  if (sc.lo.size() < size_t(P) * M) {
    sc.lo.resize(size_t(P) * M);
    sc.best.resize(size_t(P) * M);
    sc.best_v.resize(size_t(P) * M);
    sc.cands.resize(size_t(P) * M);
  }
  float mx_all = 0;
  for (int t = 0; t < M; ++t) {
    if (!quantize_row(x + size_t(t) * K, K, G, GP, sc.q.data() + size_t(t) * 2 * K, sc.t.data() + size_t(t) * G,
                      sc.m.data() + size_t(t) * GP))
      return false;
    for (int g = 0; g < G; ++g) mx_all = std::max(mx_all, sc.m[size_t(t) * GP + g]);
  }
  // No partial sum of any row's fma chain can overflow: |partial| <= max|x| L1(w) (1 + K u).
  if (double(mx_all) * s.max_l1 * (1 + gamma_of(K)) >= double(FLT_MAX) / 4) return false;
#if defined(__x86_64__)
  const bool avx2 = cpu_avx2();
#endif
  auto pass1 = [&](int i, int n) {
    const int r0 = int(int64_t(V) * i / n), r1 = int(int64_t(V) * (i + 1) / n);
    double* lo = sc.lo.data() + size_t(i) * M;
#if defined(__x86_64__)
    if (avx2) return bounds_range_avx2(s, sc, M, r0, r1, lo);
#endif
    bounds_range_portable(s, sc, M, r0, r1, lo);
  };
  auto pass2 = [&](int i, int n) {
    const int r0 = int(int64_t(V) * i / n), r1 = int(int64_t(V) * (i + 1) / n);
    for (int t = 0; t < M; ++t) {
      double lo = -INFINITY;
      for (int j = 0; j < n; ++j) lo = std::max(lo, sc.lo[size_t(j) * M + t]);
      int32_t bi = -1;
      float bv = 0;
      int32_t count = 0;
      const float* a = sc.a.data() + size_t(t) * V;
      const float* b = sc.b.data() + size_t(t) * V;
      const float* xr = x + size_t(t) * K;
      for (int r = r0; r < r1; ++r) {
        if (!(double(a[r]) + double(b[r]) + slack(a[r], b[r]) >= lo)) continue;  // its upper bound is below lo
        merge(bi, bv, r, gemm_output(xr, w, r));  // the GEMM's own bits
        ++count;
      }
      sc.best[size_t(i) * M + t] = bi;
      sc.best_v[size_t(i) * M + t] = bv;
      sc.cands[size_t(i) * M + t] = count;
    }
  };
  if (P == 1) {
    pass1(0, 1);
    pass2(0, 1);
  } else {
    pool.run(pass1);
    pool.run(pass2);
  }
  for (int t = 0; t < M; ++t) {
    int32_t bi = -1;
    float bv = 0;
    for (int j = 0; j < P; ++j) merge(bi, bv, sc.best[size_t(j) * M + t], sc.best_v[size_t(j) * M + t]);
    out[t] = bi;
  }
  return true;
}

}  // namespace la
