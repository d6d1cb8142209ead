// The quantized GEMM (layout and fixed order: include/lookahead/backend/cpu/gemm_quant.h).
//
// Steps of 1-3 rows: a tile is up to 4 panels (8 weight rows each) x C token rows (4 x C independent accumulator
// chains of 8 lanes): per k each panel's 8 rows' codes are widened to fp32 in registers (4-bit: one uint32 broadcast, shifted per lane; 8-bit: 8 bytes
// sign-extended), scaled by the group's A (and offset by B), and fused-multiply-added into each row's accumulator.
// Steps of 4 rows or more widen each group of 3 panels once into a buffer, then run every token row over it in
// tiles of 3 panels x 4 rows (accumulators kept between groups): the same operations per output, in the same order; on
// a CPU with AVX-512F, groups of 4 panels and tiles of two 16-lane registers x 8 rows (below). Only functions
// marked LA_AVX2 or LA_AVX512 use those instructions; the portable path does the same scalar operations (std::fma) in the same order, so
// both give the same bits. Compiled with -ffp-contract=off (every src/backend/cpu file).
#include "lookahead/backend/cpu/gemm_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "lookahead/model/dtype.h"
#include "lookahead/backend/cpu/isa.h"
#include "lookahead/model/quant.h"
#include "lookahead/util/error.h"

#include "avx2_lanes.h"

namespace la {
namespace {

constexpr int kLanes = 8;

// How a type's codes and scales are laid out in the panels.
struct Format {
  bool nibble;   // 4-bit codes (one uint32 per k), else int8 codes
  bool offset;   // B present
  int group;     // k per group (32, or 16 for Q6_K)
  int zero;      // 4-bit codes: stored + zero at packing, subtracted when widening (Q4_0: 8)
  int code_bytes() const { return nibble ? 4 : 8; }
  size_t group_bytes() const { return size_t(offset ? 64 : 32) + size_t(group) * code_bytes(); }
};

bool format_of(uint32_t t, Format& f) {
  switch (static_cast<QType>(t)) {
    case QType::Q4_0: f = {true, false, 32, 8}; return true;
    case QType::Q4_1: f = {true, true, 32, 0}; return true;
    case QType::Q4_K: f = {true, true, 32, 0}; return true;
    case QType::Q5_0: f = {false, false, 32, 0}; return true;
    case QType::Q5_1: f = {false, true, 32, 0}; return true;
    case QType::Q5_K: f = {false, true, 32, 0}; return true;
    case QType::Q8_0: f = {false, false, 32, 0}; return true;
    case QType::Q6_K: f = {false, false, 16, 0}; return true;
    default: return false;
  }
}

// The codes of k-th element of a group for its 8 rows (4-bit: one uint32, row r in bits 4r..4r+3, minus the
// type's zero point; others: 8 int8): the one widening step of the direct tiles and of the buffered path.
template <bool NIB>
inline int code_at(const uint8_t* codes, int kk, int l, int zero) {
  if (NIB) {
    uint32_t u;
    std::memcpy(&u, codes + 4 * kk, 4);
    return int((u >> (4 * l)) & 0xF) - zero;
  }
  return static_cast<int8_t>(codes[8 * kk + l]);
}

// Lane l of the group's weights at k: A[l] * code (+ B[l]), the dequantizer's operations (quant.h: split_block).
template <bool NIB, bool OFF>
inline float weight_at(const uint8_t* g, int kk, int l, int zero) {
  float A, w;
  std::memcpy(&A, g + 4 * l, 4);
  w = A * float(code_at<NIB>(g + (OFF ? 64 : 32), kk, l, zero));
  if (OFF) {
    float B;
    std::memcpy(&B, g + 32 + 4 * l, 4);
    w = w + B;
  }
  return w;
}

#if defined(__x86_64__)
// The same for the 8 lanes at once.
template <bool NIB, bool OFF>
LA_AVX2 inline __m256 weights_avx2(const uint8_t* g, int kk, __m256i zero) {
  const uint8_t* codes = g + (OFF ? 64 : 32);
  __m256i c;
  if constexpr (NIB) {
    uint32_t u;
    std::memcpy(&u, codes + 4 * kk, 4);
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    c = _mm256_sub_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(u)), shifts),
                                          _mm256_set1_epi32(0xF)), zero);
  } else {
    c = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + 8 * kk)));
  }
  __m256 w = _mm256_mul_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(g)), _mm256_cvtepi32_ps(c));
  if constexpr (OFF) w = _mm256_add_ps(w, _mm256_loadu_ps(reinterpret_cast<const float*>(g + 32)));
  return w;
}
#endif

// The next strip's panels (consecutive in memory after the current ones), asked for into L2 a group at a time while
// the current strip computes: left to the hardware's prefetch, a step of one row over Gemma-3-270M Q4_K_M took
// 16.4-17.3 ms, with it 9.0-9.1 (below, gemm_quant_panels). No effect on any value.
struct Ahead {
  const uint8_t* next = nullptr;  // the next strip's first panel, or null (none)
  int panels = 0;                 // its panels
  // Group bytes [at, at + gb) of each of the next strip's panels.
  void group(size_t at, size_t gb, size_t panel_bytes) const {
    for (int q = 0; q < panels; ++q)
      for (size_t b = 0; b < gb; b += 64) __builtin_prefetch(next + size_t(q) * panel_bytes + at + b, 0, 2);
  }
};

// ---- tiles of steps of 1-3 rows: P panels (independent accumulator chains) x C token rows ------------------------
// acc[q][c][l] = sum over k in order of fma(w[8 (p0 + q) + l][k], x[t0 + c][k]); panels are panel_bytes apart.
template <bool NIB, bool OFF, int P, int C>
void tile_portable(const float* x, int K, const uint8_t* panel, size_t panel_bytes, const Format& f, int t0,
                   Ahead, float* out) {
  float acc[P][C][kLanes] = {};
  const size_t gb = f.group_bytes();
  for (int k0 = 0, gi = 0; k0 < K; k0 += f.group, ++gi)
    for (int kk = 0; kk < f.group; ++kk)
      for (int q = 0; q < P; ++q) {
        const uint8_t* g = panel + size_t(q) * panel_bytes + size_t(gi) * gb;
        float w[kLanes];
        for (int l = 0; l < kLanes; ++l) w[l] = weight_at<NIB, OFF>(g, kk, l, f.zero);
        for (int t = 0; t < C; ++t) {
          const float xv = x[size_t(t0 + t) * K + k0 + kk];
          for (int l = 0; l < kLanes; ++l) acc[q][t][l] = std::fma(w[l], xv, acc[q][t][l]);
        }
      }
  std::memcpy(out, acc, sizeof(acc));
}

#if defined(__x86_64__)
// The group length is a constant (GG) so that the accumulators stay in registers (see run_buf_avx2_g); A and B
// are read from L1 as memory operands. Each group first asks for the same group of the next strip's panels.
template <bool NIB, bool OFF, int P, int C, int GG>
LA_AVX2 void tile_avx2_g(const float* x, int K, const uint8_t* panel, size_t panel_bytes, int zero_point, int t0,
                         Ahead ahead, float* out) {
  constexpr int G = GG;
  constexpr size_t gb = size_t(OFF ? 64 : 32) + size_t(G) * (NIB ? 4 : 8);
  __m256 acc[P][C];
  for (int q = 0; q < P; ++q)
    for (int t = 0; t < C; ++t) acc[q][t] = _mm256_setzero_ps();
  const float* xr[C];
  for (int t = 0; t < C; ++t) xr[t] = x + size_t(t0 + t) * K;
  const __m256i zero = _mm256_set1_epi32(zero_point);
  for (int k0 = 0, gi = 0; k0 < K; k0 += G, ++gi) {
    ahead.group(size_t(gi) * gb, gb, panel_bytes);
    for (int kk = 0; kk < G; ++kk) {
      __m256 w[P];
      for (int q = 0; q < P; ++q)
        w[q] = weights_avx2<NIB, OFF>(panel + size_t(q) * panel_bytes + size_t(gi) * gb, kk, zero);
      for (int t = 0; t < C; ++t) {
        const __m256 xb = _mm256_broadcast_ss(xr[t] + k0 + kk);
        for (int q = 0; q < P; ++q) acc[q][t] = _mm256_fmadd_ps(w[q], xb, acc[q][t]);
      }
    }
  }
  for (int q = 0; q < P; ++q)
    for (int t = 0; t < C; ++t) _mm256_storeu_ps(out + (q * C + t) * kLanes, acc[q][t]);
}

template <bool NIB, bool OFF, int P, int C>
LA_AVX2 void tile_avx2(const float* x, int K, const uint8_t* panel, size_t panel_bytes, const Format& f, int t0,
                       Ahead ahead, float* out) {
  if (f.group == 32) return tile_avx2_g<NIB, OFF, P, C, 32>(x, K, panel, panel_bytes, f.zero, t0, ahead, out);
  tile_avx2_g<NIB, OFF, P, C, 16>(x, K, panel, panel_bytes, f.zero, t0, ahead, out);
}
#endif

// ---- steps of several rows: a group is widened once into wbuf[G][8] and every token row runs over it ----------
// Each output keeps one accumulator (in acc, between groups) and still walks k in order with the same fma, so the
// bits are the direct tile's; the group's widening is paid once per step instead of once per 8 rows.
// (Element kk of the group at wbuf + kk x stride: 8 for the 8-lane tiles, 16 for the AVX-512 ones, below.)
template <bool NIB, bool OFF>
void widen_portable(const uint8_t* g, const Format& f, float* wbuf, int stride) {
  for (int kk = 0; kk < f.group; ++kk)
    for (int l = 0; l < kLanes; ++l) wbuf[kk * stride + l] = weight_at<NIB, OFF>(g, kk, l, f.zero);
}

// acc[q][t][l] (q < P panels of the block, t < M rows) += wbuf[q][kk][l] * x[t][k0 + kk] for kk = 0 .. G-1 in
// order, for token rows t0 .. t0+C-1: P weight vectors x C broadcasts per kk, as the float GEMM's 3 x 4 tile.
template <int P, int C>
void run_buf_portable(const float* x, int K, int k0, int G, const float* wbuf, int t0, int M, float* acc) {
  for (int kk = 0; kk < G; ++kk)
    for (int t = 0; t < C; ++t) {
      const float xv = x[size_t(t0 + t) * K + k0 + kk];
      for (int q = 0; q < P; ++q)
        for (int l = 0; l < kLanes; ++l) {
          float& a = acc[(size_t(q) * M + t0 + t) * kLanes + l];
          a = std::fma(wbuf[(q * G + kk) * kLanes + l], xv, a);
        }
    }
}

#if defined(__x86_64__)
template <bool NIB, bool OFF>
LA_AVX2 void widen_avx2(const uint8_t* g, const Format& f, float* wbuf, int stride) {
  const __m256i zero = _mm256_set1_epi32(f.zero);
  for (int kk = 0; kk < f.group; ++kk) _mm256_storeu_ps(wbuf + kk * stride, weights_avx2<NIB, OFF>(g, kk, zero));
}

// GG: the group length as a constant (with a run-time trip count GCC kept the accumulator array in memory,
// storing it back on every k: half the FMA rate).
template <int P, int C, int GG>
LA_AVX2 void run_buf_avx2_g(const float* x, int K, int k0, const float* wbuf, int t0, int M, float* acc) {
  constexpr int G = GG;
  __m256 a[P][C];
  for (int q = 0; q < P; ++q)
    for (int t = 0; t < C; ++t) a[q][t] = _mm256_loadu_ps(acc + (size_t(q) * M + t0 + t) * kLanes);
  const float* xr[C];
  for (int t = 0; t < C; ++t) xr[t] = x + size_t(t0 + t) * K + k0;
  for (int kk = 0; kk < G; ++kk) {
    __m256 w[P];
    for (int q = 0; q < P; ++q) w[q] = _mm256_loadu_ps(wbuf + (q * G + kk) * kLanes);
    for (int t = 0; t < C; ++t) {
      const __m256 xb = _mm256_broadcast_ss(xr[t] + kk);
      for (int q = 0; q < P; ++q) a[q][t] = _mm256_fmadd_ps(w[q], xb, a[q][t]);
    }
  }
  for (int q = 0; q < P; ++q)
    for (int t = 0; t < C; ++t) _mm256_storeu_ps(acc + (size_t(q) * M + t0 + t) * kLanes, a[q][t]);
}

template <int P, int C>
LA_AVX2 void run_buf_avx2(const float* x, int K, int k0, int G, const float* wbuf, int t0, int M, float* acc) {
  if (G == 32) return run_buf_avx2_g<P, C, 32>(x, K, k0, wbuf, t0, M, acc);
  run_buf_avx2_g<P, C, 16>(x, K, k0, wbuf, t0, M, acc);
}
#endif

#if defined(__x86_64__)
// ---- AVX-512 (steps of 4 rows or more, on a CPU with AVX-512F): a group of 4 panels is widened into
// wbuf[z][kk][16] (panels 2z and 2z + 1 side by side), and tiles of 2 such 16-lane registers x up to 8 token rows run
// over it, accumulators kept between groups in acc[z][t][16]. Each lane still takes fma(w, x, s) for k in order:
// the 8-lane tiles' bits (include/lookahead/backend/cpu/gemm.h says the same of the float GEMM's AVX-512 tiles).
constexpr int kZ512 = 2, kCols512 = 8;

template <int C, int GG>
LA_AVX512 void run_buf_avx512_g(const float* x, int K, int k0, const float* wbuf, int t0, int M, float* acc) {
  constexpr int G = GG;
  __m512 a[kZ512][C];
  for (int z = 0; z < kZ512; ++z)
    for (int t = 0; t < C; ++t) a[z][t] = _mm512_loadu_ps(acc + (size_t(z) * M + t0 + t) * 16);
  const float* xr[C];
  for (int t = 0; t < C; ++t) xr[t] = x + size_t(t0 + t) * K + k0;
  for (int kk = 0; kk < G; ++kk) {
    __m512 w[kZ512];
    for (int z = 0; z < kZ512; ++z) w[z] = _mm512_loadu_ps(wbuf + (z * G + kk) * 16);
    for (int t = 0; t < C; ++t) {
      const __m512 xb = _mm512_set1_ps(xr[t][kk]);
      for (int z = 0; z < kZ512; ++z) a[z][t] = _mm512_fmadd_ps(w[z], xb, a[z][t]);
    }
  }
  for (int z = 0; z < kZ512; ++z)
    for (int t = 0; t < C; ++t) _mm512_storeu_ps(acc + (size_t(z) * M + t0 + t) * 16, a[z][t]);
}

using Run512Fn = void (*)(const float*, int, int, const float*, int, int, float*);
template <int... Cs>
void fill_run512(Run512Fn (*row)[2], std::integer_sequence<int, Cs...>) {
  ((row[Cs][0] = &run_buf_avx512_g<Cs + 1, 32>, row[Cs][1] = &run_buf_avx512_g<Cs + 1, 16>), ...);
}
Run512Fn run512_for(int C, int G) {
  struct T {
    Run512Fn fn[kCols512][2];
    T() { fill_run512(fn, std::make_integer_sequence<int, kCols512>{}); }
  };
  static const T t;
  return t.fn[C - 1][G == 32 ? 0 : 1];
}
#endif

using WidenFn = void (*)(const uint8_t*, const Format&, float*, int);
using RunFn = void (*)(const float*, int, int, int, const float*, int, int, float*);
constexpr int kBufPanels = 3, kBufCols = 4;  // the buffered tile: 3 panels x 4 token rows (12 accumulators)

WidenFn widen_for(const Format& f, bool avx2) {
#if defined(__x86_64__)
  if (avx2)
    return f.nibble ? (f.offset ? &widen_avx2<true, true> : &widen_avx2<true, false>)
                    : (f.offset ? &widen_avx2<false, true> : &widen_avx2<false, false>);
#endif
  return f.nibble ? (f.offset ? &widen_portable<true, true> : &widen_portable<true, false>)
                  : (f.offset ? &widen_portable<false, true> : &widen_portable<false, false>);
}

template <int P, int... Cs>
void fill_run(RunFn* row, bool avx2, std::integer_sequence<int, Cs...>) {
#if defined(__x86_64__)
  if (avx2) {
    ((row[Cs] = &run_buf_avx2<P, Cs + 1>), ...);
    return;
  }
#endif
  ((row[Cs] = &run_buf_portable<P, Cs + 1>), ...);
}

RunFn run_for(int P, int C, bool avx2) {
  struct T {
    RunFn fn[kBufPanels][kBufCols];
    explicit T(bool a) {
      const auto seq = std::make_integer_sequence<int, kBufCols>{};
      fill_run<1>(fn[0], a, seq);
      fill_run<2>(fn[1], a, seq);
      fill_run<3>(fn[2], a, seq);
    }
  };
  static const T portable(false), fast(true);
  return (avx2 ? fast : portable).fn[P - 1][C - 1];
}

constexpr int kBufferedFrom = 4;  // steps of at least this many rows widen each group once

constexpr int kTilePanels = 4, kTileCols = 3;  // direct tiles: up to 4 panels x 3 token rows

using TileFn = void (*)(const float*, int, const uint8_t*, size_t, const Format&, int, Ahead, float*);

template <bool NIB, bool OFF, int P, int... Cs>
void fill(TileFn* row, bool avx2, std::integer_sequence<int, Cs...>) {
#if defined(__x86_64__)
  if (avx2) {
    ((row[Cs] = &tile_avx2<NIB, OFF, P, Cs + 1>), ...);
    return;
  }
#endif
  ((row[Cs] = &tile_portable<NIB, OFF, P, Cs + 1>), ...);
}

struct Table {
  TileFn fn[2][2][kTilePanels][kTileCols];  // [nibble][offset][P - 1][C - 1]
  template <bool NIB, bool OFF>
  void fill_type(bool avx2) {
    const auto seq = std::make_integer_sequence<int, kTileCols>{};
    fill<NIB, OFF, 1>(fn[NIB][OFF][0], avx2, seq);
    fill<NIB, OFF, 2>(fn[NIB][OFF][1], avx2, seq);
    fill<NIB, OFF, 3>(fn[NIB][OFF][2], avx2, seq);
    fill<NIB, OFF, 4>(fn[NIB][OFF][3], avx2, seq);
  }
  explicit Table(bool avx2) {
    fill_type<false, false>(avx2);
    fill_type<false, true>(avx2);
    fill_type<true, false>(avx2);
    fill_type<true, true>(avx2);
  }
};

TileFn tile_for(const Format& f, int P, int C, bool avx2) {
  static const Table portable(false), fast(true);
  return (avx2 ? fast : portable).fn[f.nibble][f.offset][P - 1][C - 1];
}

// y = (acc + bias) (+ y), lane by lane, rows < N: the same two IEEE adds as the float GEMM's epilogue.
void store(const float* acc, int C, int p, int t0, int N, const GemmOut& o, int row_stride = kLanes) {
  const int n0 = p * kLanes;
  for (int t = 0; t < C; ++t) {
    const float* a = acc + size_t(t) * row_stride;
    float* y = o.y + size_t(t0 + t) * o.ldy;
    for (int l = 0; l < kLanes && n0 + l < N; ++l) {
      float s = a[l];
      if (o.bias) s += o.bias[n0 + l];
      y[n0 + l] = o.accumulate ? y[n0 + l] + s : s;
    }
  }
}

#if defined(__x86_64__)
// The AVX-512 form of the buffered path (steps of 4 rows or more): strips of 4 panels, each group widened once into
// wbuf512 (the 16-lane layout above) and every 8 token rows run over it.
void gemm_quant_panels_avx512(const float* x, int M, const PackedWeight& w, int p0, int p1, const GemmOut& o,
                              const Format& f) {
  constexpr int SP = 2 * kZ512;
  const size_t panel_bytes = size_t(w.cols / f.group) * f.group_bytes();
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  thread_local std::vector<float> acc;
  alignas(64) float wbuf[kZ512 * 32 * 16] = {};  // a missing odd panel's lanes stay 0 (computed, never stored)
  acc.resize(size_t(kZ512) * M * 16);
  const WidenFn widen = widen_for(f, true);
  for (int p = p0; p < p1; p += SP) {
    const int P = std::min(SP, p1 - p);
    if (P < SP) std::fill(std::begin(wbuf), std::end(wbuf), 0.f);
    std::fill(acc.begin(), acc.end(), 0.f);
    const uint8_t* g = base + size_t(p) * panel_bytes;
    const Ahead ahead{g + size_t(P) * panel_bytes, std::min(SP, p1 - p - P)};
    for (int k0 = 0; k0 < w.cols; k0 += f.group, g += f.group_bytes()) {
      ahead.group(size_t(k0 / f.group) * f.group_bytes(), f.group_bytes(), panel_bytes);
      for (int q = 0; q < P; ++q) widen(g + size_t(q) * panel_bytes, f, wbuf + (q / 2) * f.group * 16 + (q % 2) * kLanes, 16);
      for (int t = 0; t < M; t += kCols512) {
        const int C = std::min(kCols512, M - t);
        run512_for(C, f.group)(x, w.cols, k0, wbuf, t, M, acc.data());
      }
    }
    for (int q = 0; q < P; ++q) store(acc.data() + size_t(q / 2) * M * 16 + (q % 2) * kLanes, M, p + q, 0, w.rows, o, 16);
  }
}
#endif

}  // namespace

bool quant_gemm_supports(uint32_t type) {
  Format f;
  return format_of(type, f);
}

PackedWeight pack_quant_weight(const QuantRows& q, const std::function<void()>& read_some) {
  Format f;
  LA_CHECK(format_of(q.type, f), "pack_quant_weight: type ", qtype_name(q.type), " is not served quantized");
  const QTypeInfo info = qtype_info(q.type);
  LA_CHECK(!q.rows.empty() && q.cols > 0 && q.cols % info.block == 0, "pack_quant_weight: bad shape (",
           q.rows.size(), " x ", q.cols, ")");
  PackedWeight p;
  p.quantized = true;
  p.qtype = q.type;
  p.rows = static_cast<int>(q.rows.size());
  p.cols = q.cols;
  const int groups = q.cols / f.group;
  const size_t panel_bytes = size_t(groups) * f.group_bytes();
  const size_t bytes = size_t(p.panels()) * panel_bytes;
  void* buf = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  LA_CHECK(buf != nullptr, "pack_quant_weight: cannot allocate ", bytes, " bytes");
  p.bytes = bytes;
  std::memset(buf, 0, bytes);
  uint8_t* out = static_cast<uint8_t*>(buf);
  const int gpb = info.block / f.group;  // groups per block
  std::vector<float> A(static_cast<size_t>(gpb)), B(static_cast<size_t>(gpb));
  std::vector<int> code(static_cast<size_t>(info.block));
  for (int n = 0; n < p.rows; ++n) {
    const int pnl = n / kLanes, lane = n % kLanes;
    if (read_some && lane == 0 && pnl > 0 && pnl % 1024 == 0) read_some();
    uint8_t* panel = out + size_t(pnl) * panel_bytes;
    for (int blk = 0; blk < q.cols / info.block; ++blk) {
      split_block(q.type, q.rows[size_t(n)] + size_t(blk) * info.bytes, A.data(), B.data(), code.data());
      for (int gi = 0; gi < gpb; ++gi) {
        uint8_t* g = panel + size_t(blk * gpb + gi) * f.group_bytes();
        std::memcpy(g + 4 * lane, &A[gi], 4);
        if (f.offset) std::memcpy(g + 32 + 4 * lane, &B[gi], 4);
        uint8_t* codes = g + (f.offset ? 64 : 32);
        for (int kk = 0; kk < f.group; ++kk) {
          const int c = code[size_t(gi * f.group + kk)];
          if (f.nibble) {
            uint32_t u;
            std::memcpy(&u, codes + 4 * kk, 4);
            u |= uint32_t((c + f.zero) & 0xF) << (4 * lane);
            std::memcpy(codes + 4 * kk, &u, 4);
          } else {
            codes[8 * kk + lane] = static_cast<uint8_t>(static_cast<int8_t>(c));
          }
        }
      }
    }
  }
  if (read_some) read_some();
  // Padding rows of the last panel: A = 0, B = -0 (zeroed memory has B = +0; the rows are never stored anyway).
  p.data = buf;
  p.storage = std::shared_ptr<const void>(buf, [](const void* v) { std::free(const_cast<void*>(v)); });
  return p;
}

void gemm_quant_panels(const float* x, int M, const PackedWeight& w, int p0, int p1, const GemmOut& o) {
  Format f;
  format_of(w.qtype, f);
  const bool avx2 = cpu_avx2();
  const size_t panel_bytes = size_t(w.cols / f.group) * f.group_bytes();
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
#if defined(__x86_64__)
  if (M >= kBufferedFrom && cpu_isa() == CpuIsa::Avx512) return gemm_quant_panels_avx512(x, M, w, p0, p1, o, f);
#endif
  if (M >= kBufferedFrom) {
    thread_local std::vector<float> acc;
    alignas(32) float wbuf[kBufPanels * 32 * kLanes];
    acc.resize(size_t(kBufPanels) * M * kLanes);
    const WidenFn widen = widen_for(f, avx2);
    for (int p = p0; p < p1; p += kBufPanels) {
      const int P = std::min(kBufPanels, p1 - p);
      std::fill(acc.begin(), acc.end(), 0.f);
      const uint8_t* g = base + size_t(p) * panel_bytes;
      const Ahead ahead{g + size_t(P) * panel_bytes, std::min(kBufPanels, p1 - p - P)};
      for (int k0 = 0; k0 < w.cols; k0 += f.group, g += f.group_bytes()) {
        ahead.group(size_t(k0 / f.group) * f.group_bytes(), f.group_bytes(), panel_bytes);
        for (int q = 0; q < P; ++q) widen(g + size_t(q) * panel_bytes, f, wbuf + q * f.group * kLanes, kLanes);
        for (int t = 0; t < M; t += kBufCols) {
          const int C = std::min(kBufCols, M - t);
          run_for(P, C, avx2)(x, w.cols, k0, f.group, wbuf, t, M, acc.data());
        }
      }
      for (int q = 0; q < P; ++q) store(acc.data() + size_t(q) * M * kLanes, M, p + q, 0, w.rows, o);
    }
    return;
  }
  float acc[kTilePanels * kTileCols * kLanes];
  for (int p = p0; p < p1; p += kTilePanels) {
    const int P = std::min(kTilePanels, p1 - p);
    // Steps of 1-3 rows are one tile per strip: it asks for the next strip.
    const Ahead ahead{base + size_t(p + P) * panel_bytes, std::min(kTilePanels, p1 - p - P)};
    for (int t = 0; t < M; t += kTileCols) {
      const int C = std::min(kTileCols, M - t);
      tile_for(f, P, C, avx2)(x, w.cols, base + size_t(p) * panel_bytes, panel_bytes, f, t, ahead, acc);
      for (int q = 0; q < P; ++q) store(acc + q * C * kLanes, C, p + q, t, w.rows, o);
    }
  }
}

}  // namespace la
