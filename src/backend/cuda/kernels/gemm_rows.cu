// The fixed-configuration GEMM of a step's rows: y = x w^T (+ bias), batch-invariant (see gemm_rows.h for why and
// how). One kernel template per element type: fp32 scalar FMAs, fp16/bf16 WMMA with fp32 accumulators.
#include <mma.h>

#include <algorithm>
#include <type_traits>

#include "common.cuh"
#include "gemm_rows.h"

namespace la::kern::detail {

// Shared-memory layout of one CTA: kStages pipeline stages of [BM x BK] activations and [BN x BK] weights (k
// contiguous, padded by one 16-byte vector per row against bank conflicts), and for the WMMA path an fp32 [BM x
// BN] output staging tile that reuses the stages' bytes after the k loop. BK (64 for 16-bit, 32 for fp32: the
// same 8 KiB of weights per stage) and kStages only decide how many weight bytes are in flight; neither changes
// any element's summation order (k increasing, one accumulator), so neither matters for batch invariance.
template <class E>
struct GemmCfg {
  static constexpr int BM = 32, BN = 64, BK = sizeof(E) == 2 ? 64 : 32, kStages = 3;
  static constexpr int kThreads = 128, kWarps = kThreads / 32;
  static constexpr bool kMma = sizeof(E) == 2;
  static constexpr int kVec = 16 / int(sizeof(E));  // elements per 16-byte copy
  static constexpr int LDE = BK + kVec;             // row pitch of a stage tile, elements
  static constexpr int LDC = BN + 4;                // row pitch of the output staging tile, floats
  static constexpr size_t xBytes = size_t(BM) * LDE * sizeof(E);
  static constexpr size_t wBytes = size_t(BN) * LDE * sizeof(E);
  static constexpr size_t stageBytes = xBytes + wBytes;
  static constexpr size_t cBytes = kMma ? size_t(BM) * LDC * sizeof(float) : 0;
  static constexpr size_t bytes = std::max(kStages * stageBytes, cBytes);
  // fp32: each thread owns TM x TN outputs, rows ty*TM.. (ty = tid / 16), columns tx + 16*j (tx = tid % 16).
  static constexpr int TM = 4, TN = 4;

  static_assert(BK % 16 == 0 && BK % kVec == 0, "k stage: whole WMMA chunks and whole 16-byte copies");
  static_assert(kStages >= 2, "a prefetch in flight while a stage is computed");
  static_assert((LDE * sizeof(E)) % 16 == 0, "stage rows 16-byte aligned (cp.async destination, WMMA ldm)");
  static_assert((16 * LDE * sizeof(E)) % 32 == 0 && (16 * sizeof(E)) % 32 == 0,
                "WMMA A/B fragment pointers (16-row and 16-k steps) 256-bit aligned");
  static_assert(xBytes % 128 == 0 && wBytes % 128 == 0, "stage tiles keep the 128-byte base alignment");
  static_assert((LDC * sizeof(float)) % 16 == 0 && (16 * LDC * sizeof(float)) % 32 == 0 &&
                    (16 * sizeof(float)) % 32 == 0,
                "WMMA accumulator store: ldm a multiple of 16 bytes, fragment pointers 256-bit aligned");
  static_assert(!kMma || (BM == 32 && BN / 16 == kWarps), "WMMA: warp w owns column fragment w, both row fragments");
  static_assert(kMma || (BM == (kThreads / 16) * TM && BN == 16 * TN), "fp32: 16 x 8 threads of 4 x 4 outputs");
  static_assert(kMma || (32 / 16) * TM == 8, "fp32: a warp owns 8 consecutive rows (its skip test below)");
  static_assert(kMma || (BK % 4 == 0 && (LDE * sizeof(E)) % 16 == 0), "fp32: 16-byte shared loads of 4 k");
  static_assert(bytes <= 48 * 1024, "fits the default dynamic shared memory (no opt-in attribute needed)");
};


// Copies rows [row0, row0 + ROWS) x k [k0, k0 + BK) of src (row pitch ld) into a stage tile; rows >= nrows and
// k >= K are zero-filled. Vector path: 16-byte cp.async (a chunk crossing K copies its valid bytes, the rest is
// zero-filled); scalar path: element loads (any alignment), stored synchronously.
template <class E, int ROWS>
__device__ __forceinline__ void load_stage(E* dst, const E* src, int64_t ld, int row0, int nrows, int k0, int K,
                                           bool vec) {
  using C = GemmCfg<E>;
  constexpr int cpr = C::BK / C::kVec;  // 16-byte chunks per tile row
  for (int idx = threadIdx.x; idx < ROWS * cpr; idx += C::kThreads) {
    const int r = idx / cpr, c = idx - r * cpr;
    const int gr = row0 + r, gk = k0 + c * C::kVec;
    E* d = dst + r * C::LDE + c * C::kVec;
    const bool in = gr < nrows && gk < K;
    if (vec) {
      const int n = in ? min(C::kVec, K - gk) : 0;
      cp_async16(d, in ? src + int64_t(gr) * ld + gk : src, n * int(sizeof(E)));
    } else {
#pragma unroll
      for (int i = 0; i < C::kVec; ++i) d[i] = in && gk + i < K ? src[int64_t(gr) * ld + gk + i] : from_f<E>(0.f);
    }
  }
}

template <class E>
__global__ void __launch_bounds__(128) gemm_rows_kernel(const LinearArgs p, const bool vec) {
  using C = GemmCfg<E>;
  constexpr int BM = C::BM, BN = C::BN, BK = C::BK;
  LA_DYNAMIC_SMEM(unsigned char, smem, 128);
  const int tid = threadIdx.x, warp = tid >> 5;
  const int r0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const E* x = static_cast<const E*>(p.x);
  const E* w = static_cast<const E*>(p.w);
  const int nt = (p.K + BK - 1) / BK;
  auto sx = [&](int s) { return reinterpret_cast<E*>(smem + s * C::stageBytes); };
  auto sw = [&](int s) { return reinterpret_cast<E*>(smem + s * C::stageBytes + C::xBytes); };
  auto load = [&](int t) {
    load_stage<E, BM>(sx(t % C::kStages), x, p.ldx, r0, p.M, t * BK, p.K, vec);
    load_stage<E, BN>(sw(t % C::kStages), w, p.ldw, n0, p.N, t * BK, p.K, vec);
  };

  // fp32 accumulators (only one set is used per element type; the other is dead code the compiler drops).
  const int tx = tid & 15, ty = tid >> 4;
  float acc[C::TM][C::TN] = {};
  using namespace nvcuda;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c0, c1;
  if constexpr (C::kMma) {
    wmma::fill_fragment(c0, 0.f);
    wmma::fill_fragment(c1, 0.f);
  }
  // Warp-uniform skips of arithmetic on rows past M (their outputs are never stored; skipping changes no bit of
  // the valid rows, whose accumulators do not read them).
  const bool rows_live = C::kMma ? true : r0 + 8 * warp < p.M;
  const bool second_live = r0 + 16 < p.M;  // WMMA: row fragment 1 holds a valid row

  // Multistage pipeline: k tiles t + 1 .. t + kStages - 1 are in flight while tile t is computed (one commit
  // group per tile, empty past the end, so the group count stays in step).
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < nt) load(s);
    cp_async_commit();
  }
  for (int t = 0; t < nt; ++t) {
    cp_async_wait<C::kStages - 2>();  // tile t landed (this thread's copies)
    __syncthreads();                  // everyone's copies of tile t visible; everyone done with tile t - 1
    // Prefetch into tile t - 1's stage, which the barrier above just freed.
    if (t + C::kStages - 1 < nt) load(t + C::kStages - 1);
    cp_async_commit();
    const E* X = sx(t % C::kStages);
    const E* W = sw(t % C::kStages);
    if constexpr (C::kMma) {
      // Warp w: output columns [16w, 16w + 16), rows [0, 16) and [16, 32); k chunks in increasing order.
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major> fb;
        wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major> fa;
        wmma::load_matrix_sync(fb, W + warp * 16 * C::LDE + kk * 16, C::LDE);  // B[k][n] = w[n][k]
        wmma::load_matrix_sync(fa, X + kk * 16, C::LDE);
        wmma::mma_sync(c0, fa, fb, c0);
        if (second_live) {
          wmma::load_matrix_sync(fa, X + 16 * C::LDE + kk * 16, C::LDE);
          wmma::mma_sync(c1, fa, fb, c1);
        }
      }
    } else if (rows_live) {
      // One FMA per k in increasing order into each output's own accumulator. Shared memory is read 4 k at a time
      // (16-byte loads: with the 144-byte row pitch a quarter-warp's 8 rows hit 8 distinct 4-bank groups).
#pragma unroll 2
      for (int kk = 0; kk < BK; kk += 4) {
        float a[C::TM][4], b[C::TN][4];
#pragma unroll
        for (int i = 0; i < C::TM; ++i) load_f<E, 4>(X + (ty * C::TM + i) * C::LDE + kk, a[i]);
#pragma unroll
        for (int j = 0; j < C::TN; ++j) load_f<E, 4>(W + (tx + 16 * j) * C::LDE + kk, b[j]);
#pragma unroll
        for (int q = 0; q < 4; ++q)
#pragma unroll
          for (int i = 0; i < C::TM; ++i)
#pragma unroll
            for (int j = 0; j < C::TN; ++j) acc[i][j] = fmaf(a[i][q], b[j][q], acc[i][j]);
      }
    }
  }
  cp_async_wait<0>();  // (the groups still open are empty)

  E* y = static_cast<E*>(p.y);
  const E* bias = static_cast<const E*>(p.bias);
  if constexpr (C::kMma) {
    // Through shared memory (it reuses the stages, once every warp is done reading them), so that consecutive
    // threads store consecutive columns.
    __syncthreads();
    float* sC = reinterpret_cast<float*>(smem);
    wmma::store_matrix_sync(sC + warp * 16, c0, C::LDC, wmma::mem_row_major);
    wmma::store_matrix_sync(sC + 16 * C::LDC + warp * 16, c1, C::LDC, wmma::mem_row_major);
    __syncthreads();
    for (int idx = tid; idx < BM * BN; idx += C::kThreads) {
      const int r = idx / BN, c = idx - r * BN;
      const int gr = r0 + r, gc = n0 + c;
      if (gr >= p.M || gc >= p.N) continue;
      float v = sC[r * C::LDC + c];
      if (bias) v += to_f(bias[gc]);
      y[int64_t(gr) * p.ldy + gc] = from_f<E>(v);
    }
  } else {
#pragma unroll
    for (int i = 0; i < C::TM; ++i) {
      const int gr = r0 + ty * C::TM + i;
      if (gr >= p.M) break;
#pragma unroll
      for (int j = 0; j < C::TN; ++j) {
        const int gc = n0 + tx + 16 * j;
        if (gc >= p.N) continue;
        float v = acc[i][j];
        if (bias) v += to_f(bias[gc]);
        y[int64_t(gr) * p.ldy + gc] = from_f<E>(v);
      }
    }
  }
}

}  // namespace la::kern::detail

namespace la::kern {

cudaError_t launch_linear_fixed(const LinearArgs& a, cudaStream_t s) {
  using namespace detail;
  if (a.dt != DType::F32 && a.dt != DType::F16 && a.dt != DType::BF16) return cudaErrorInvalidValue;
  if (a.M <= 0 || a.N <= 0 || a.K <= 0 || !a.x || !a.w || !a.y) return cudaErrorInvalidValue;
  if (a.ldx < a.K || a.ldw < a.K || a.ldy < a.N) return cudaErrorInvalidValue;
  const int64_t es = int64_t(dtype_size(a.dt));
  auto misaligned = [&](const void* q) { return (reinterpret_cast<uintptr_t>(q) % uintptr_t(es)) != 0; };
  if (misaligned(a.x) || misaligned(a.w) || misaligned(a.y) || misaligned(a.bias)) return cudaErrorInvalidValue;
  // 16-byte copies allowed: x, w and their row pitches 16-byte aligned.
  const bool vec = aligned16(a.x) && aligned16(a.w) && (a.ldx * es) % 16 == 0 && (a.ldw * es) % 16 == 0;
  return dispatch_dtype(a.dt, [&](auto tag) {
    using E = decltype(tag);
    using C = GemmCfg<E>;
    const int64_t gm = (int64_t(a.M) + C::BM - 1) / C::BM, gn = (int64_t(a.N) + C::BN - 1) / C::BN;
    if (gn > 65535) return cudaErrorInvalidValue;  // grid.y limit
    LA_LAUNCH(dim3(unsigned(gm), unsigned(gn)), C::kThreads, C::bytes, s, gemm_rows_kernel<E>)(a, vec);
    return cudaGetLastError();
  });
}

}  // namespace la::kern
