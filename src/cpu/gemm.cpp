// The CPU GEMM (what it computes, and why the order is fixed: include/lookahead/cpu/gemm.h).
//
// One template body serves both ISA paths: Lanes<Isa> is 8 fp32 accumulators, either an AVX2 register or an array
// updated with std::fma, with the same fold. Only functions marked LA_AVX2 use AVX2/FMA/F16C instructions, and
// they run only when cpu_isa() says this CPU has them. Floating-point contraction is off for this folder
// (CMakeLists.txt), so no other multiply-add is fused differently by the two paths.
#include "lookahead/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "lookahead/cpu/isa.h"
#include "lookahead/cpu/thread_pool.h"

#include "avx2_lanes.h"

namespace la {
namespace {

constexpr int kRowsPerTile = 4;  // weight rows per block
constexpr int kColsPerTile = 3;  // token rows per tile

// ---- portable lanes -------------------------------------------------------------------------------------------
struct PortableLanes {
  float v[8];
  static PortableLanes zero() { return PortableLanes{{0, 0, 0, 0, 0, 0, 0, 0}}; }
};
inline void load8(const float* p, float* out) { std::memcpy(out, p, 32); }
inline void load8(const uint16_t* p, WType t, float* out) {
  for (int l = 0; l < 8; ++l) out[l] = t == WType::BF16 ? bf16_to_f32(p[l]) : f16_to_f32(p[l]);
}
inline float fold(const PortableLanes& a) {
  const float* v = a.v;
  return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

// Loads 8 weights of row r at k, widened to fp32.
template <WType WT>
inline void wload_portable(const void* w, size_t idx, float* out) {
  if constexpr (WT == WType::F32) {
    load8(static_cast<const float*>(w) + idx, out);
  } else {
    load8(static_cast<const uint16_t*>(w) + idx, WT, out);
  }
}

template <WType WT, int R, int C>
void tile_portable(const float* x, int K, const void* w, int n, int t, const GemmOut& o) {
  PortableLanes acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = PortableLanes::zero();
  const int K8 = K & ~7;
  for (int k = 0; k < K8; k += 8) {
    float wv[R][8];
    for (int r = 0; r < R; ++r) wload_portable<WT>(w, size_t(n + r) * K + k, wv[r]);
    for (int c = 0; c < C; ++c) {
      const float* xp = x + size_t(t + c) * K + k;
      for (int r = 0; r < R; ++r)
        for (int l = 0; l < 8; ++l) acc[r][c].v[l] = std::fma(wv[r][l], xp[l], acc[r][c].v[l]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float s = fold(acc[r][c]);
      for (int k = K8; k < K; ++k) s = std::fma(load_f32(w, WT, long(n + r) * K + k), x[size_t(t + c) * K + k], s);
      if (o.bias) s += o.bias[n + r];
      float& y = o.y[size_t(t + c) * o.ldy + n + r];
      y = o.accumulate ? y + s : s;
    }
}

// ---- AVX2 lanes -----------------------------------------------------------------------------------------------
#if defined(__x86_64__)
// count weights from element `first` widened into dst (exact: the bits the tiles' own conversion gives).
template <WType WT>
LA_AVX2 void widen_avx2(const void* w, size_t first, size_t count, float* dst) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) _mm256_storeu_ps(dst + i, wload_avx2<WT>(w, first + i));
  for (; i < count; ++i) dst[i] = load_f32(w, WT, long(first + i));
}

template <WType WT, int R, int C>
LA_AVX2 void tile_avx2(const float* x, int K, const void* w, int n, int t, const GemmOut& o) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  const int K8 = K & ~7;
  for (int k = 0; k < K8; k += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = wload_avx2<WT>(w, size_t(n + r) * K + k);
    for (int c = 0; c < C; ++c) {
      const __m256 xv = _mm256_loadu_ps(x + size_t(t + c) * K + k);
      for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(wv[r], xv, acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float s = fold_avx2(acc[r][c]);
      for (int k = K8; k < K; ++k) s = std::fma(load_f32(w, WT, long(n + r) * K + k), x[size_t(t + c) * K + k], s);
      if (o.bias) s += o.bias[n + r];
      float& y = o.y[size_t(t + c) * o.ldy + n + r];
      y = o.accumulate ? y + s : s;
    }
}
#endif

// ---- dispatch over tile shapes --------------------------------------------------------------------------------
using TileFn = void (*)(const float*, int, const void*, int, int, const GemmOut&);

template <WType WT, int R, int C>
TileFn tile_fn(bool avx2) {
#if defined(__x86_64__)
  if (avx2) return &tile_avx2<WT, R, C>;
#endif
  return &tile_portable<WT, R, C>;
}

template <WType WT, int R>
TileFn tile_for_cols(int c, bool avx2) {
  switch (c) {
    case 1: return tile_fn<WT, R, 1>(avx2);
    case 2: return tile_fn<WT, R, 2>(avx2);
    default: return tile_fn<WT, R, 3>(avx2);
  }
}

template <WType WT>
TileFn tile_for(int r, int c, bool avx2) {
  switch (r) {
    case 1: return tile_for_cols<WT, 1>(c, avx2);
    case 2: return tile_for_cols<WT, 2>(c, avx2);
    case 3: return tile_for_cols<WT, 3>(c, avx2);
    default: return tile_for_cols<WT, 4>(c, avx2);
  }
}

TileFn tile_for(WType wt, int r, int c, bool avx2) {
  switch (wt) {
    case WType::F32: return tile_for<WType::F32>(r, c, avx2);
    case WType::BF16: return tile_for<WType::BF16>(r, c, avx2);
    case WType::F16: return tile_for<WType::F16>(r, c, avx2);
  }
  return nullptr;
}

// Rows n .. n+R-1 of w widened into `dst` (R x K fp32): exact, so tiles over it give the bits the direct ones do.
void widen_rows(const WeightView& w, int n, int R, float* dst, bool avx2) {
  const size_t K = size_t(w.cols), first = size_t(n) * K, count = size_t(R) * K;
#if defined(__x86_64__)
  if (avx2 && w.type == WType::BF16) return widen_avx2<WType::BF16>(w.data, first, count, dst);
  if (avx2 && w.type == WType::F16) return widen_avx2<WType::F16>(w.data, first, count, dst);
#endif
  for (size_t i = 0; i < count; ++i) dst[i] = load_f32(w.data, w.type, long(first + i));
}

}  // namespace

void GemmScratch::reserve(int threads, int max_k) {
  if (int(per_thread.size()) < threads) per_thread.resize(threads);
  for (auto& s : per_thread)
    if (s.size() < size_t(kRowsPerTile) * max_k) s.resize(size_t(kRowsPerTile) * max_k);
}

void gemm_rows(const float* x, int M, const WeightView& w, int n0, int n1, const GemmOut& o, float* scratch) {
  const bool avx2 = cpu_isa() == CpuIsa::Avx2;
  const int K = w.cols;
  // Widening a block once pays when more than one token tile reuses it.
  const bool widen = w.type != WType::F32 && M > kColsPerTile && scratch != nullptr;
  for (int n = n0; n < n1; n += kRowsPerTile) {
    const int R = std::min(kRowsPerTile, n1 - n);
    const void* wp = w.data;
    int wn = n;
    WType wt = w.type;
    if (widen) {
      widen_rows(w, n, R, scratch, avx2);
      wp = scratch;
      wn = 0;
      wt = WType::F32;
    }
    GemmOut ob = o;
    if (widen) {  // the scratch holds rows 0..R-1: shift the output and bias to rows n..
      ob.y = o.y + n;
      ob.bias = o.bias ? o.bias + n : nullptr;
    }
    for (int t = 0; t < M; t += kColsPerTile) {
      const int C = std::min(kColsPerTile, M - t);
      tile_for(wt, R, C, avx2)(x, K, wp, wn, t, ob);
    }
  }
}

void gemm(ThreadPool& pool, GemmScratch& scratch, const float* x, int M, const WeightView& w, const GemmOut& o) {
  const int blocks = (w.rows + kRowsPerTile - 1) / kRowsPerTile;
  const double macs = double(M) * w.rows * w.cols;
  const int P = macs < 65536.0 ? 1 : pool.size();  // tiny products: a region costs more than the work
  auto part = [&](int i, int n) {
    const int b0 = int(int64_t(blocks) * i / n), b1 = int(int64_t(blocks) * (i + 1) / n);
    if (b0 >= b1) return;
    float* s = i < int(scratch.per_thread.size()) && !scratch.per_thread[i].empty() ? scratch.per_thread[i].data()
                                                                                     : nullptr;
    gemm_rows(x, M, w, b0 * kRowsPerTile, std::min(w.rows, b1 * kRowsPerTile), o, s);
  };
  if (P == 1) {
    part(0, 1);
  } else {
    pool.run(part);
  }
}

float dot_f32(const float* a, const float* b, int K) {
  float y = 0;
  GemmOut o{&y, 1, nullptr, false};
  WeightView w{b, WType::F32, 1, K};
  gemm_rows(a, 1, w, 0, 1, o, nullptr);
  return y;
}

}  // namespace la
