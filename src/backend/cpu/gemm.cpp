// The CPU GEMM (what it computes, the panel layout, and why the order is fixed: include/lookahead/backend/cpu/gemm.h).
//
// One loop structure serves every ISA path: a tile of P panels x C token rows keeps P x C accumulators of 8 lanes
// (AVX2 registers, or arrays updated with std::fma) and walks k in order; the AVX-512 tiles hold two panels in
// one 16-lane register (below). Only functions marked LA_AVX2 or LA_AVX512 use those instructions, and they run
// only when cpu_isa() says this CPU has them. Floating-point contraction
// is off for this folder (CMakeLists.txt), so no other multiply-add is fused differently by the two paths.
#include "lookahead/backend/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "lookahead/backend/cpu/gemm_quant.h"
#include "lookahead/backend/cpu/isa.h"
#include "lookahead/backend/cpu/thread_pool.h"
#include "lookahead/util/error.h"

#include "avx2_lanes.h"

namespace la {
namespace {

constexpr int kLanes = 8;       // weight rows per panel
constexpr int kMaxAcc = 12;     // accumulators per tile (with the preloaded operands: at most 16 AVX2 registers)
constexpr int kMaxPanels = 12;  // panels per tile (12 only in a 1-row remainder tile, below)
constexpr int kMaxCols = 4;     // token rows per tile
constexpr int kBlock = 12;      // panels per block from 4 rows: the remainder tile's panels read while in L2

// The tile for a step of M rows (P panels x C token rows). Up to 3 rows, one tile holds every row and 4 panels
// (4 to 12 accumulator chains hide the FMA latency; each weight is read once, at the memory's pace). From 4 rows,
// 3 panels x 4 rows: 12 accumulators + 3 weight vectors + 1 broadcast fill the 16 AVX2 registers, and the block
// of 3 panels stays in L1/L2 while every 4-row tile reuses it. Measured on the 2-core EPYC (AVX2), a whole
// SmolLM2 pass of GEMMs with 2 threads: 3 x 4 beat one-pass tiles of 1 x 8, 1 x 12, 2 x 6 and 2 x 4 at M = 8..32
// (21.6 vs 25.5-26.7 ms at M = 8), and 4 x 3 with the weights held first spilled (29.5 ms).
// The r = M % 4 rows left over (a batch of 4k requests plus a draft row) get a tile of their own with 12
// accumulators too: 12 panels x 1 row, 6 x 2 or 4 x 3, over each block of 12 panels right after the block's
// 4-row tiles (the block is still in L2). A 3 x r tile instead holds 3r FMA chains, too few to hide the FMA
// latency: one extra row cost about two thirds of a whole 4-row tile, so a step of 17 rows ran as slow as 19
// (SmolLM2 fp32, 2 threads: 16 -> 17 rows +4.9 ms, 17 -> 19 +0.9 ms), and a one-row draft beside a batch of 16
// cost 1.6 tokens' worth of the plain step. At M = 6 two 4 x 3 tiles cover fp32 rows with no remainder: a pass of
// SmolLM2's layer GEMMs (2 threads, the 2-core EPYC, 2026-11-28) 10.4-10.8 ms against 12.6-12.9 with 3 x 4 and a
// remainder (M = 5 and 7 gained nothing from 4 x 3, 4 x 2 or 3 x 3). Not for bf16/fp16, whose 4 x 3 tile widens
// four weight vectors a k step: a whole bf16 forward of 6 rows took 15.6-16.2 ms with it against 11.7-13.2.
struct TileShape {
  int panels, cols;
};
TileShape tile_shape(int M, WType t) {
  return M <= 3 ? TileShape{4, M} : M == 6 && t == WType::F32 ? TileShape{4, 3} : TileShape{3, 4};
}

size_t panel_elems(int K) { return size_t(K) * kLanes; }

// ---- the tile: acc[p][c][l] = sum over k in order of fma(w[panel p0+p][k][l], x[t0+c][k]) ------------------------
template <WType WT>
inline void load_lanes_portable(const void* w, size_t idx, float* out) {
  for (int l = 0; l < kLanes; ++l) out[l] = load_f32(w, WT, long(idx + l));
}

// Prefetch: while a tile computes, it asks the memory for a share of the next strip's bytes (the 64-byte lines of
// [at, end), spread evenly over its k steps). No effect on any value.
struct Prefetch {
  const char* at = nullptr;
  const char* end = nullptr;
};

template <WType WT, int P, int C>
void tile_portable(const float* x, int K, const void* w, int p0, int t0, Prefetch, float* out) {
  float acc[P][C][kLanes] = {};
  for (int k = 0; k < K; ++k) {
    for (int p = 0; p < P; ++p) {
      float wv[kLanes];
      load_lanes_portable<WT>(w, (size_t(p0 + p) * K + k) * kLanes, wv);
      for (int c = 0; c < C; ++c) {
        const float xv = x[size_t(t0 + c) * K + k];
        for (int l = 0; l < kLanes; ++l) acc[p][c][l] = std::fma(wv[l], xv, acc[p][c][l]);
      }
    }
  }
  std::memcpy(out, acc, sizeof(acc));
}

#if defined(__x86_64__)
// The smaller operand side is loaded first and held (P weight vectors, or C broadcasts), the other streamed, so
// that P x C accumulators + min(P, C) + 1 registers fit in 16. Either order does the same fma per accumulator.
// NPF: prefetch instructions per k step (0, 1 or 2: below).
template <WType WT, int P, int C, int NPF>
LA_AVX2 void tile_avx2_k(const float* x, int K, const void* w, int p0, int t0, Prefetch pf, float* out) {
  __m256 acc[P][C];
  for (int p = 0; p < P; ++p)
    for (int c = 0; c < C; ++c) acc[p][c] = _mm256_setzero_ps();
  const float* xr[C];
  for (int c = 0; c < C; ++c) xr[c] = x + size_t(t0 + c) * K;
  const size_t base = size_t(p0) * K * kLanes, stride = size_t(K) * kLanes;
  const long lines = (pf.end - pf.at) / 64;  // spread over the K steps: a Bresenham count
  long due = 0;
  for (int k = 0; k < K; ++k) {
    // Up to NPF lines per k step, branch-free (a line asked for twice costs nothing more), with GCC's builtin: with
    // _mm_prefetch GCC 12 stored every accumulator to the stack at every k.
    if constexpr (NPF > 0) due += lines;
    for (int i = 0; i < NPF; ++i) {
      const long go = due >= K;
      due -= go * K;
      pf.at += go * 64;
      __builtin_prefetch(pf.at, 0, 2);  // into L2 (a line ahead: the share's first line, the hardware's anyway)
    }
    const size_t wk = base + size_t(k) * kLanes;
    if constexpr (P <= C) {
      __m256 wv[P];
      for (int p = 0; p < P; ++p) wv[p] = wload_avx2<WT>(w, wk + p * stride);
      for (int c = 0; c < C; ++c) {
        const __m256 xb = _mm256_broadcast_ss(xr[c] + k);
        for (int p = 0; p < P; ++p) acc[p][c] = _mm256_fmadd_ps(wv[p], xb, acc[p][c]);
      }
    } else {
      __m256 xb[C];
      for (int c = 0; c < C; ++c) xb[c] = _mm256_broadcast_ss(xr[c] + k);
      for (int p = 0; p < P; ++p) {
        const __m256 wv = wload_avx2<WT>(w, wk + p * stride);
        for (int c = 0; c < C; ++c) acc[p][c] = _mm256_fmadd_ps(wv, xb[c], acc[p][c]);
      }
    }
  }
  for (int p = 0; p < P; ++p)
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(out + (p * C + c) * kLanes, acc[p][c]);
}

// The tile with as many prefetch slots per k step as its share of the next strip needs: a strip of 3 or 4 fp32
// panels is 1.5 or 2 lines a k step, so a strip read by one tile (M = 1 to 4) needs two slots, while a
// compute-bound tile with a small share pays no second slot (two slots in every tile cost 8-45% at M = 8 to 16).
template <WType WT, int P, int C>
LA_AVX2 void tile_avx2(const float* x, int K, const void* w, int p0, int t0, Prefetch pf, float* out) {
  const long lines = (pf.end - pf.at) / 64;
  if (lines <= 0) return tile_avx2_k<WT, P, C, 0>(x, K, w, p0, t0, pf, out);
  if (lines <= K) return tile_avx2_k<WT, P, C, 1>(x, K, w, p0, t0, pf, out);
  tile_avx2_k<WT, P, C, 2>(x, K, w, p0, t0, pf, out);
}
#endif

// ---- dispatch over tile shapes: table[type][P - 1][C - 1] for P <= 12, C <= 4, P x C <= 12 ---------------------
using TileFn = void (*)(const float*, int, const void*, int, int, Prefetch, float*);

template <WType WT, int P, int C>
TileFn tile_fn(bool avx2) {
  if constexpr (P * C > kMaxAcc) {
    return nullptr;
  } else {
#if defined(__x86_64__)
    if (avx2) return &tile_avx2<WT, P, C>;
#endif
    return &tile_portable<WT, P, C>;
  }
}

template <WType WT, int P, int... Cs>
void fill_row(TileFn* row, bool avx2, std::integer_sequence<int, Cs...>) {
  ((row[Cs] = tile_fn<WT, P, Cs + 1>(avx2)), ...);
}

template <WType WT, int... Ps>
void fill_rows(TileFn (*rows)[kMaxCols], bool avx2, std::integer_sequence<int, Ps...>) {
  (fill_row<WT, Ps + 1>(rows[Ps], avx2, std::make_integer_sequence<int, kMaxCols>{}), ...);
}

struct TileTable {
  TileFn fn[3][kMaxPanels][kMaxCols] = {};
  template <WType WT>
  void fill(int i, bool avx2) {
    fill_rows<WT>(fn[i], avx2, std::make_integer_sequence<int, kMaxPanels>{});
  }
  explicit TileTable(bool avx2) {
    fill<WType::F32>(0, avx2);
    fill<WType::BF16>(1, avx2);
    fill<WType::F16>(2, avx2);
  }
};

TileFn tile_for(WType wt, int p, int c, bool avx2) {
  static const TileTable portable(false), fast(true);
  const int i = wt == WType::F32 ? 0 : wt == WType::BF16 ? 1 : 2;
  return (avx2 ? fast : portable).fn[i][p - 1][c - 1];
}

// The epilogue: y = (acc + bias) (+ y) lane by lane, rows < N only. The AVX2 form does the same two IEEE adds per
// lane on whole panels, so both give the same bits.
void store_tile_portable(const float* acc, int P, int C, int p0, int t0, int N, const GemmOut& o) {
  for (int p = 0; p < P; ++p)
    for (int c = 0; c < C; ++c) {
      const float* a = acc + (p * C + c) * kLanes;
      const int n0 = (p0 + p) * kLanes;
      float* y = o.y + size_t(t0 + c) * o.ldy;
      for (int l = 0; l < kLanes && n0 + l < N; ++l) {
        float s = a[l];
        if (o.bias) s += o.bias[n0 + l];
        y[n0 + l] = o.accumulate ? y[n0 + l] + s : s;
      }
    }
}

#if defined(__x86_64__)
LA_AVX2 void store_tile_avx2(const float* acc, int P, int C, int p0, int t0, int N, const GemmOut& o) {
  if ((p0 + P) * kLanes > N) return store_tile_portable(acc, P, C, p0, t0, N, o);  // a padded panel: lane by lane
  for (int p = 0; p < P; ++p) {
    const int n0 = (p0 + p) * kLanes;
    const __m256 b = o.bias ? _mm256_loadu_ps(o.bias + n0) : _mm256_setzero_ps();
    for (int c = 0; c < C; ++c) {
      __m256 s = _mm256_loadu_ps(acc + (p * C + c) * kLanes);
      if (o.bias) s = _mm256_add_ps(s, b);
      float* y = o.y + size_t(t0 + c) * o.ldy + n0;
      _mm256_storeu_ps(y, o.accumulate ? _mm256_add_ps(_mm256_loadu_ps(y), s) : s);
    }
  }
}
#endif

void store_tile(const float* acc, int P, int C, int p0, int t0, int N, const GemmOut& o, bool avx2) {
#if defined(__x86_64__)
  if (avx2) return store_tile_avx2(acc, P, C, p0, t0, N, o);
#endif
  store_tile_portable(acc, P, C, p0, t0, N, o);
}

// The bytes of float panels [p, min(p1, p + n)) of w (the next strip: the panels are consecutive in memory).
Prefetch strip_span(const PackedWeight& w, int p, int n, int p1) {
  const char* wb = static_cast<const char*>(w.data);
  const size_t one = size_t(w.cols) * kLanes * size_t(wtype_size(w.type));  // one panel, all k
  return Prefetch{wb + size_t(p) * one, wb + size_t(std::max(p, std::min(p1, p + n))) * one};
}

#if defined(__x86_64__)
// ---- the AVX-512 tiles (fp32, bf16 and fp16 weights; steps of 4 rows and more) ----------------------------------
// A 16-lane register holds two panels side by side: lanes 0-7 the k-th weights of panel p, lanes 8-15 those of
// panel p + 1 (two 8-lane loads and one insert: the panel layout stays the one every path reads). A tile of Z
// such registers x C token rows keeps Z x C accumulators, each lane the fma chain of one output over k in order,
// as in every other path: the same bits, with twice the lanes per instruction. With an odd number n of panels the
// last register's upper half repeats its lower half (computed, never stored). Of the 32 registers, Z x C <= 24
// hold accumulators, Z the weights and one the broadcast activation.
// GCC 12's _mm512_extractf64x4_pd and _mm512_insertf64x4 pass _mm256_undefined_pd() (a self-initialized value) as
// their unused merge operand, which -Wuninitialized reports in every instance; nothing here reads such a value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
constexpr int kMaxZ = 8, kMaxC512 = 8, kMaxAcc512 = 24;

// Panels p and p + 1 at one k (8 elements at lo, 8 at hi) as 16 fp32 lanes; bf16/fp16 widened exactly.
template <WType WT>
LA_AVX512 inline __m512 wload2_avx512(const void* w, size_t lo, size_t hi) {
  if constexpr (WT == WType::F32) {
    const float* f = static_cast<const float*>(w);
    const __m512d l = _mm512_castps_pd(_mm512_zextps256_ps512(_mm256_loadu_ps(f + lo)));
    return _mm512_castpd_ps(_mm512_insertf64x4(l, _mm256_castps_pd(_mm256_loadu_ps(f + hi)), 1));
  } else {
    const uint16_t* h = static_cast<const uint16_t*>(w);
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + lo));
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(a),
                                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + hi)), 1);
    if constexpr (WT == WType::BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
    return _mm512_cvtph_ps(b);
  }
}

template <WType WT, int Z, int C, int NPF>
LA_AVX512 void tile512_k(const float* x, int K, const void* w, int p0, int n, int t0, Prefetch pf, float* out) {
  __m512 acc[Z][C];
  for (int z = 0; z < Z; ++z)
    for (int c = 0; c < C; ++c) acc[z][c] = _mm512_setzero_ps();
  const float* xr[C];
  for (int c = 0; c < C; ++c) xr[c] = x + size_t(t0 + c) * K;
  const size_t stride = size_t(K) * kLanes;
  const size_t base = size_t(p0) * stride;
  const size_t last_hi = (n & 1) ? 0 : stride;  // the last register's upper panel: the next one, or itself again
  const long lines = (pf.end - pf.at) / 64;
  long due = 0;
  for (int k = 0; k < K; ++k) {
    if constexpr (NPF > 0) due += lines;
    for (int i = 0; i < NPF; ++i) {  // as tile_avx2_k
      const long go = due >= K;
      due -= go * K;
      pf.at += go * 64;
      __builtin_prefetch(pf.at, 0, 2);
    }
    const size_t wk = base + size_t(k) * kLanes;
    __m512 wv[Z];
    for (int z = 0; z < Z; ++z) {
      const size_t lo = wk + size_t(2 * z) * stride;
      wv[z] = wload2_avx512<WT>(w, lo, lo + (z == Z - 1 ? last_hi : stride));
    }
    for (int c = 0; c < C; ++c) {
      const __m512 xb = _mm512_set1_ps(xr[c][k]);
      for (int z = 0; z < Z; ++z) acc[z][c] = _mm512_fmadd_ps(wv[z], xb, acc[z][c]);
    }
  }
  // Panel-major, as the 8-lane tiles leave it for store_tile: out[(panel x C + c) x 8 + lane].
  for (int z = 0; z < Z; ++z)
    for (int c = 0; c < C; ++c) {
      _mm256_storeu_ps(out + (2 * z * C + c) * kLanes, _mm512_castps512_ps256(acc[z][c]));
      const __m256d h = _mm512_extractf64x4_pd(_mm512_castps_pd(acc[z][c]), 1);
      _mm256_storeu_ps(out + ((2 * z + 1) * C + c) * kLanes, _mm256_castpd_ps(h));
    }
}

template <WType WT, int Z, int C>
LA_AVX512 void tile512(const float* x, int K, const void* w, int p0, int n, int t0, Prefetch pf, float* out) {
  const long lines = (pf.end - pf.at) / 64;
  if (lines <= 0) return tile512_k<WT, Z, C, 0>(x, K, w, p0, n, t0, pf, out);
  if (lines <= K) return tile512_k<WT, Z, C, 1>(x, K, w, p0, n, t0, pf, out);
  tile512_k<WT, Z, C, 2>(x, K, w, p0, n, t0, pf, out);
}

using Tile512Fn = void (*)(const float*, int, const void*, int, int, int, Prefetch, float*);

template <WType WT, int Z, int... Cs>
void fill512_row(Tile512Fn* row, std::integer_sequence<int, Cs...>) {
  ((row[Cs] = Z * (Cs + 1) <= kMaxAcc512 ? &tile512<WT, Z, (Z * (Cs + 1) <= kMaxAcc512 ? Cs + 1 : 1)> : nullptr),
   ...);
}
template <WType WT, int... Zs>
void fill512(Tile512Fn (*t)[kMaxC512], std::integer_sequence<int, Zs...>) {
  (fill512_row<WT, Zs + 1>(t[Zs], std::make_integer_sequence<int, kMaxC512>{}), ...);
}
Tile512Fn tile512_for(WType wt, int Z, int C) {
  struct Table {
    Tile512Fn fn[3][kMaxZ][kMaxC512] = {};
    Table() {
      fill512<WType::F32>(fn[0], std::make_integer_sequence<int, kMaxZ>{});
      fill512<WType::BF16>(fn[1], std::make_integer_sequence<int, kMaxZ>{});
      fill512<WType::F16>(fn[2], std::make_integer_sequence<int, kMaxZ>{});
    }
  };
  static const Table t;
  return t.fn[wt == WType::F32 ? 0 : wt == WType::BF16 ? 1 : 2][Z - 1][C - 1];
}
#pragma GCC diagnostic pop

// Rows in tiles of 8 over strips of 4 panels (2 registers: 16 accumulators), each strip's tiles prefetching the
// next strip as the 8-lane path does; the r = M % 8 rows left over in tiles of Z registers, Z x r = 8 to 14 chains
// (enough to hide the FMA latency), over each block of 16 panels right after its 8-row tiles, from L2. Steps of
// 1-3 rows keep the 8-lane tiles: they wait on memory, not on arithmetic.
constexpr int kBlock512 = 16;
int remainder_regs(int r) { return r == 1 ? 8 : r == 2 ? 6 : r == 3 ? 4 : r == 4 ? 3 : 2; }

void gemm_panels_avx512(const float* x, int M, const PackedWeight& w, int p0, int p1, const GemmOut& o) {
  alignas(64) float acc[2 * kMaxAcc512 * kLanes];
  auto run = [&](int p, int n, int t, int C, Prefetch pf) {
    tile512_for(w.type, (n + 1) / 2, C)(x, w.cols, w.data, p, n, t, pf, acc);
    store_tile_avx2(acc, n, C, p, t, w.rows, o);
  };
  auto strip = [&](int p, int n) { return strip_span(w, p, n, p1); };
  constexpr int C = 8, SP = 4;
  const int full = M / C * C, r = M - full, tiles = full / C;
  const int rp = r > 0 ? 2 * remainder_regs(r) : 0;  // the remainder tile's panels
  for (int b = p0; b < p1; b += kBlock512) {
    const int be = std::min(p1, b + kBlock512);
    for (int p = b; tiles > 0 && p < be; p += SP) {
      const int n = std::min(SP, be - p);
      const Prefetch next = strip(p + n, SP);
      const size_t lines = size_t(next.end - next.at) / 64;
      for (int i = 0; i < tiles; ++i)
        run(p, n, i * C, C, Prefetch{next.at + lines * i / tiles * 64, next.at + lines * (i + 1) / tiles * 64});
    }
    // Alone (fewer than 8 rows), the remainder tile reads its panels from memory: it prefetches the next ones.
    for (int p = b; r > 0 && p < be; p += rp) {
      const int n = std::min(rp, be - p);
      run(p, n, full, r, tiles > 0 ? Prefetch{} : strip(p + n, rp));
    }
  }
}
#endif

// Panel p, k, lane l <- row 8p + l, column k: reads 8 rows side by side and writes each panel in order.
template <class E>
void pack_panels(const E* src, int N, int K, E* dst) {
  for (int p = 0; p < (N + kLanes - 1) / kLanes; ++p) {
    const int rows = std::min(kLanes, N - p * kLanes);
    E* d = dst + size_t(p) * panel_elems(K);
    for (int l = 0; l < rows; ++l) {
      const E* s = src + size_t(p * kLanes + l) * K;
      for (int k = 0; k < K; ++k) d[size_t(k) * kLanes + l] = s[k];
    }
  }
}

}  // namespace

PackedWeight pack_weight(const WeightView& w) {
  LA_CHECK(w.rows > 0 && w.cols > 0 && w.data != nullptr, "pack_weight: empty weight");
  PackedWeight p;
  p.type = w.type;
  p.rows = w.rows;
  p.cols = w.cols;
  const size_t es = size_t(wtype_size(w.type));
  const size_t bytes = size_t(p.panels()) * panel_elems(w.cols) * es;
  void* buf = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  LA_CHECK(buf != nullptr, "pack_weight: cannot allocate ", bytes, " bytes");
  p.bytes = bytes;
  std::memset(buf, 0, bytes);
  if (es == 4) {
    pack_panels(static_cast<const uint32_t*>(w.data), w.rows, w.cols, static_cast<uint32_t*>(buf));
  } else {
    pack_panels(static_cast<const uint16_t*>(w.data), w.rows, w.cols, static_cast<uint16_t*>(buf));
  }
  p.data = buf;
  p.storage = std::shared_ptr<const void>(buf, [](const void* q) { std::free(const_cast<void*>(q)); });
  return p;
}

void gemm_panels(const float* x, int M, const PackedWeight& w, int p0, int p1, const GemmOut& o) {
  if (w.quantized) return gemm_quant_panels(x, M, w, p0, p1, o);
#if defined(__x86_64__)
  if (M >= 4 && cpu_isa() == CpuIsa::Avx512) return gemm_panels_avx512(x, M, w, p0, p1, o);
#endif
  const bool avx2 = cpu_avx2();
  const TileShape ts = tile_shape(M, w.type);
  float acc[kMaxAcc * kLanes];
  auto run = [&](int p, int P, int t, int C, Prefetch pf) {
    tile_for(w.type, P, C, avx2)(x, w.cols, w.data, p, t, pf, acc);
    store_tile(acc, P, C, p, t, w.rows, o, avx2);
  };
  auto strip = [&](int p, int n) { return strip_span(w, p, n, p1); };
  // Up to 3 rows, one tile reads each strip of 4 panels once and prefetches the next strip as it goes: left to the
  // hardware's prefetch, 2 and 3 rows ran a quarter slower than 1 (the loads of a tile with more FMAs per byte
  // overlap less of the memory's latency). A pass of SmolLM2's layer GEMMs, fp32, 2 threads, the 2-core EPYC
  // (2026-11-28), three interleaved rounds: M = 1 9.4-10.7 -> 9.8-10.1 ms, 2: 12.1-14.3 -> 9.6-9.9, 3: 12.2-12.7 ->
  // 9.5-9.6; and M = 4, whose single 4-row tile now takes two lines a k step, 12.3-12.6 -> 9.9-10.0.
  if (M < 4) {
    for (int p = p0; p < p1; p += ts.panels) {
      const int P = std::min(ts.panels, p1 - p);
      run(p, P, 0, M, strip(p + P, ts.panels));
    }
    return;
  }
  // From 4 rows, the first 4-row tile of a strip of 3 panels reads it from memory and the next ones from L2: left
  // alone, the strip's memory time and its tiles' arithmetic add up. So each strip's tiles prefetch the next strip
  // (the panels are consecutive in memory) into L2, each tile a share, while they compute: the two overlap. A pass
  // of SmolLM2's layer GEMMs, fp32, 2 threads, on the 2-core Intel VM (2026-11-27): M = 8 21.9 -> 19.1 ms, 16:
  // 32.1 -> 24.6, 32: 52.6 -> 42.9 (158 GFLOP/s, 84% of the two cores' FMA peak), 64: 93.6 -> 85.0; M = 1-3 do
  // not prefetch (memory-bound, the hardware's prefetch suffices).
  const int full = M / ts.cols * ts.cols, r = M - full, tiles = full / ts.cols;
  const int rp = r > 0 ? kMaxAcc / r : 0;  // the remainder tile's panels: 12, 6 or 4
  for (int b = p0; b < p1; b += kBlock) {
    const int be = std::min(p1, b + kBlock);
    for (int p = b; p < be; p += ts.panels) {
      const int P = std::min(ts.panels, be - p);
      const Prefetch next = strip(p + P, ts.panels);
      const size_t lines = size_t(next.end - next.at) / 64;
      for (int i = 0; i < tiles; ++i) {
        const Prefetch pf{next.at + lines * i / tiles * 64, next.at + lines * (i + 1) / tiles * 64};
        run(p, P, i * ts.cols, ts.cols, pf);
      }
    }
    for (int p = b; r > 0 && p < be; p += rp) run(p, std::min(rp, be - p), full, r, Prefetch{});  // from L2
  }
}

void gemm(ThreadPool& pool, const float* x, int M, const PackedWeight& w, const GemmOut& o) {
  const int panels = w.panels();
  const double macs = double(M) * w.rows * w.cols;
  const int P = macs < 65536.0 ? 1 : pool.size();  // tiny products: a region costs more than the work
  auto part = [&](int i, int n) {
    const int b0 = int(int64_t(panels) * i / n), b1 = int(int64_t(panels) * (i + 1) / n);
    if (b0 >= b1) return;
    gemm_panels(x, M, w, b0, b1, o);
  };
  if (P == 1) {
    part(0, 1);
  } else {
    pool.run(part);
  }
}

float packed_at(const PackedWeight& w, int n, int k) {
  return load_f32(w.data, w.type, long(size_t(n / kLanes) * panel_elems(w.cols) + size_t(k) * kLanes + n % kLanes));
}

float gemm_output(const float* x, const PackedWeight& w, int n) {
  float acc = 0;
  for (int k = 0; k < w.cols; ++k) acc = std::fma(packed_at(w, n, k), x[k], acc);
  return acc;
}

// ---- the 8-lane dot product (RMSNorm) -------------------------------------------------------------------------
namespace {
float dot_portable(const float* a, const float* b, int K) {
  float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int K8 = K & ~7;
  for (int k = 0; k < K8; k += 8)
    for (int l = 0; l < 8; ++l) v[l] = std::fma(b[k + l], a[k + l], v[l]);
  float s = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
  for (int k = K8; k < K; ++k) s = std::fma(b[k], a[k], s);
  return s;
}
#if defined(__x86_64__)
LA_AVX2 float dot_avx2(const float* a, const float* b, int K) {
  __m256 acc = _mm256_setzero_ps();
  const int K8 = K & ~7;
  for (int k = 0; k < K8; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(b + k), _mm256_loadu_ps(a + k), acc);
  float s = fold_avx2(acc);
  for (int k = K8; k < K; ++k) s = std::fma(b[k], a[k], s);
  return s;
}
#endif
}  // namespace

float dot_f32(const float* a, const float* b, int K) {
#if defined(__x86_64__)
  if (cpu_avx2()) return dot_avx2(a, b, K);
#endif
  return dot_portable(a, b, K);
}

}  // namespace la
