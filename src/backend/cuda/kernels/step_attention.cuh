// Step (tree) attention kernel template; instantiated per element type in step_attention_{f32,f16,bf16}.cu so
// that the three compile in parallel. See step_attention.h for the design.
#pragma once
#include <mma.h>

#include <type_traits>

#include "common.cuh"
#include "step_attention.h"
#include "step_attention_plan.h"

namespace la::kern::detail {

struct AttnParams {
  const void* q;
  int64_t q_st, q_sh;
  const void* kc;
  int64_t kc_st, kc_sh;
  const void* vc;
  int64_t vc_st, vc_sh;
  const void* kn;
  int64_t kn_st, kn_sh;
  const void* vn;
  int64_t vn_st, vn_sh;
  const uint32_t* anc;
  int anc_words;
  void* out;
  int64_t o_st, o_sh;
  float* part_o;    // [splits][T*Hq][D]
  float* part_lse;  // [splits][T*Hq], log2 domain
  int T, Hq, Hkv, G, D;
  int cache_len;
  const int32_t* cache_len_dev;
  int max_cache_len;
  // Slot mode (a batched step over several caches, seg non-null): seg[4 s ..] = {first token, tokens, cache length,
  // cache rows} of slot s, slot_kv[s] / slot_kv[nseg + s] its K / V cache base; kc/vc/cache_len are unused.
  const int32_t* seg;
  void* const* slot_kv;
  int nseg;
  int splits;       // grid.z
  int split_tiles;  // key tiles per split (split_keys / BN): split boundaries at fixed absolute positions
  float scale_log2;  // softmax scale * log2(e)
};

// The shared-memory layout (and its static_asserts) lives in the host-only step_attention_plan.h.
// MMA: WMMA (fp16/bf16 with fast_mma); else scalar fp32 FMAs on widened elements (every dtype by default).
template <class E, int DP, int BM, bool MMA>
struct AttnCfg : AttnLayout<int(sizeof(E)), DP, BM, MMA> {
  static_assert(std::is_same_v<E, float> == (sizeof(E) == 4), "fp32, or a 16-bit type");
  // Probabilities: the WMMA operand type on the tensor-core path, fp32 on the scalar path.
  using P = std::conditional_t<MMA, E, float>;
};

// The step index of the k-th ancestor (root first: k = 0) of a token, from its ancestor bits, or -1 past the token
// itself. Parents precede children, so the set bits in increasing index are the ancestors in increasing depth.
__device__ __forceinline__ int kth_ancestor(const uint32_t* ab, int words, int k) {
  for (int w = 0; w < words; ++w) {
    uint32_t b = ab[w];
    const int n = __popc(b);
    if (k < n) {
      for (; k > 0; --k) b &= b - 1;
      return 32 * w + __ffs(int(b)) - 1;
    }
    k -= n;
  }
  return -1;
}
// Depth of a token in its step (0: a root), from its ancestor bits.
__device__ __forceinline__ int step_depth(const uint32_t* ab, int words) {
  int n = 0;
  for (int w = 0; w < words; ++w) n += __popc(ab[w]);
  return n - 1;
}

// Issues the cp.async copies of key/value tile `tile` (rows beyond the key range are zero-filled). With `cache_only`
// (the scalar path, which reads each row's step keys by position, see below) the step's rows are zero-filled too.
template <class E, int DP, int BM, bool MMA>
__device__ __forceinline__ void load_kv_tile(E* dst, const E* cache, int64_t c_st, int64_t c_sh, const E* fresh,
                                             int64_t f_st, int64_t f_sh, int hk, int tile, int L, int Ltot, int D,
                                             bool cache_only) {
  using C = AttnCfg<E, DP, BM, MMA>;
  const int cpr = D / C::kVec;  // chunks per row
  for (int idx = threadIdx.x; idx < C::BN * cpr; idx += C::kThreads) {
    const int r = idx / cpr, c = idx - r * cpr;
    const int j = tile * C::BN + r;
    const E* src = fresh;
    int bytes = 0;
    if (j < L) {
      src = cache + int64_t(j) * c_st + int64_t(hk) * c_sh + c * C::kVec;
      bytes = 16;
    } else if (j < Ltot && !cache_only) {
      src = fresh + int64_t(j - L) * f_st + int64_t(hk) * f_sh + c * C::kVec;
      bytes = 16;
    }
    cp_async16(dst + r * C::LDE + c * C::kVec, src, bytes);
  }
}

template <class E, int DP, int BM, bool MMA>
__global__ void __launch_bounds__(128) step_attention_kernel(const AttnParams p) {
  using C = AttnCfg<E, DP, BM, MMA>;
  using PT = typename C::P;
  constexpr int BN = C::BN;
  LA_DYNAMIC_SMEM(unsigned char, smem, 128);
  E* sQ = reinterpret_cast<E*>(smem + C::offQ);
  E* sK = reinterpret_cast<E*>(smem + C::offK);
  E* sV = reinterpret_cast<E*>(smem + C::offV);
  float* sS = reinterpret_cast<float*>(smem + C::offS);
  PT* sP = reinterpret_cast<PT*>(smem + C::offP);
  float* sO = reinterpret_cast<float*>(smem + C::offO);
  float* sM = reinterpret_cast<float*>(smem + C::offM);
  float* sL = reinterpret_cast<float*>(smem + C::offL);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int hk = blockIdx.y, split = blockIdx.z;
  // The CTA's query rows [r0, row_end) (rows = (token, head-in-group) pairs, token-major), the cache it reads and
  // its length. One cache: row tiles of BM over all T * G rows. Slot mode: blockIdx.x numbers the row tiles of
  // slot 0, then those of slot 1, ... (a tile never mixes slots: it shares K/V tiles of ONE cache); CTAs past the
  // last slot's tiles return at once (the grid has nseg spare tiles). Each slot reads only its own cache, length
  // and step rows (its tokens' ancestors, in the step-wide ancestor bits, are its own rows).
  int r0, row_end, L, Tk;
  const E* kc;
  const E* vc;
  if (p.seg) {
    int x = blockIdx.x, s = 0;
    for (; s < p.nseg; ++s) {
      const int tiles = (p.seg[4 * s + 1] * p.G + BM - 1) / BM;
      if (x < tiles) break;
      x -= tiles;
    }
    if (s == p.nseg) return;  // block-uniform, before any barrier
    const int first = p.seg[4 * s], n = p.seg[4 * s + 1];
    r0 = first * p.G + x * BM;
    row_end = (first + n) * p.G;
    // A slot's length is clamped to [0, its cache rows], as a single cache's to max_cache_len.
    L = max(0, min(p.seg[4 * s + 2], min(p.seg[4 * s + 3], p.max_cache_len)));
    Tk = n;
    kc = static_cast<const E*>(p.slot_kv[s]);
    vc = static_cast<const E*>(p.slot_kv[p.nseg + s]);
  } else {
    r0 = blockIdx.x * BM;
    row_end = p.T * p.G;
    // A device length is clamped to [0, max_cache_len] (never reads past what the host vouched for).
    L = p.cache_len_dev ? max(0, min(*p.cache_len_dev, p.max_cache_len)) : p.cache_len;
    Tk = p.T;
    kc = static_cast<const E*>(p.kc);
    vc = static_cast<const E*>(p.vc);
  }
  const int rows = row_end;  // rows below r0 belong to other tiles; the checks below only need the end
  // Key positions [0, L + Tk): the keys past a row's depth are masked, so tiles past them change no bit (a tile
  // with every key masked keeps the running max and sum: alpha = 1, sum += 0), whatever Tk is.
  const int Ltot = L + Tk;
  // Tiles and splits at fixed absolute key positions (step_attention_plan.h: attn_splits): tile k holds key
  // positions [k * BN, (k + 1) * BN), split s the tiles [s * split_tiles, (s + 1) * split_tiles).
  const int ntiles = (Ltot + BN - 1) / BN;
  const int t_begin = min(ntiles, split * p.split_tiles);
  const int t_end = min(ntiles, t_begin + p.split_tiles);
  const int D = p.D;
  // Scalar path (fp32, and fp16/bf16 by default; fp32 FMAs on widened elements): a row's step keys are taken by
  // POSITION, not by step index: key position L + k of a row is the k-th ancestor of its token (root first), read
  // from k_new/v_new directly, and positions past the token are masked. So a token sees its keys in the tiles,
  // lanes and splits a plain decode of its path puts them in (where the same rows sit in the cache), and its output
  // is the same bits alone and inside any tree: every operation is an IEEE fp32 FMA/exp2/add in a fixed order that
  // depends on the row and the key position only. The WMMA path (fast_mma: one K tile shared by 16 rows) keeps
  // step keys at their step index: invariant for a token whose ancestors are the step's first rows (a chain), not
  // for other tree nodes, and on a GPU its in-mma accumulation order is the hardware's.
  constexpr bool kGather = !C::kMma;
  const int aw = p.anc_words;

  const E* kn = static_cast<const E*>(p.kn);
  const E* vn = static_cast<const E*>(p.vn);

  // Zero everything (padding columns of Q/K/V and the accumulator stay zero), then initialise the row stats.
  for (int i = tid; i < int(C::bytes / 16); i += C::kThreads) reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  for (int r = tid; r < BM; r += C::kThreads) sM[r] = -INFINITY;

  // Q tile: rows are (token, head in group) pairs, token-major.
  {
    const E* q = static_cast<const E*>(p.q);
    const int cpr = D / C::kVec;
    for (int idx = tid; idx < BM * cpr; idx += C::kThreads) {
      const int r = idx / cpr, c = idx - r * cpr;
      const int gr = r0 + r;
      if (gr < rows) {
        const int t = gr / p.G, qh = hk * p.G + (gr - t * p.G);
        cp_async16(sQ + r * C::LDE + c * C::kVec, q + int64_t(t) * p.q_st + int64_t(qh) * p.q_sh + c * C::kVec, 16);
      }
    }
  }
  if (t_begin < t_end) load_kv_tile<E, DP, BM, MMA>(sK, kc, p.kc_st, p.kc_sh, kn, p.kn_st, p.kn_sh, hk, t_begin, L, Ltot, D, kGather);
  cp_async_commit();  // group: Q + K(t_begin)
  if (t_begin < t_end) load_kv_tile<E, DP, BM, MMA>(sV, vc, p.vc_st, p.vc_sh, vn, p.vn_st, p.vn_sh, hk, t_begin, L, Ltot, D, kGather);
  cp_async_commit();  // group: V(t_begin)

  const int kt_n = (D + 15) / 16;                  // 16-wide k steps over the head dim actually used
  const int mt_n = min(BM, rows - r0 + 15) / 16;   // 16-row tiles holding valid rows (>= 1)

  for (int tile = t_begin; tile < t_end; ++tile) {
    cp_async_wait<1>();  // K(tile) (and Q) landed
    __syncthreads();

    // ---- S = Q K^T (raw dot products) ----
    if constexpr (C::kMma) {
      using namespace nvcuda;
      constexpr int NT = BN / 16;
      for (int ti = warp; ti < mt_n * NT; ti += C::kWarps) {
        const int mi = ti / NT, ni = ti - mi * NT;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.f);
        for (int k = 0; k < kt_n; ++k) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major> fb;
          wmma::load_matrix_sync(fa, sQ + mi * 16 * C::LDE + k * 16, C::LDE);
          wmma::load_matrix_sync(fb, sK + ni * 16 * C::LDE + k * 16, C::LDE);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(sS + mi * 16 * C::LDS + ni * 16, acc, C::LDS, wmma::mem_row_major);
      }
    } else {
      const int nr = mt_n * 16;
      for (int idx = tid; idx < nr * BN; idx += C::kThreads) {
        const int r = idx / BN, c = idx - r * BN;
        const E* qr = sQ + r * C::LDE;
        const E* kr = sK + c * C::LDE;
        const int j = tile * BN + c;  // key position
        if (j >= L) {  // a step position: this row's ancestor at depth j - L, if any
          const int gr = r0 + r;
          const int a = gr < rows ? kth_ancestor(p.anc + int64_t(gr / p.G) * aw, aw, j - L) : -1;
          if (a < 0) {
            sS[r * C::LDS + c] = 0.f;  // masked below
            continue;
          }
          kr = kn + int64_t(a) * p.kn_st + int64_t(hk) * p.kn_sh;
        }
        float s = 0.f;  // widened exactly (16-bit -> fp32), so fp16/bf16 run fp32's arithmetic on their values
        for (int d = 0; d < D; ++d) s = fmaf(to_f(qr[d]), to_f(kr[d]), s);
        sS[r * C::LDS + c] = s;
      }
    }
    __syncthreads();  // S complete, K buffer free
    if (tile + 1 < t_end)
      load_kv_tile<E, DP, BM, MMA>(sK, kc, p.kc_st, p.kc_sh, kn, p.kn_st, p.kn_sh, hk, tile + 1, L, Ltot, D, kGather);
    cp_async_commit();  // group: K(tile+1) (maybe empty)

    // ---- online softmax: one warp per row ----
    const int kbase = tile * BN;
    for (int r = warp; r < BM; r += C::kWarps) {
      const int gr = r0 + r;
      if (gr >= rows) break;  // rows are increasing in r: warp-uniform
      const int t = gr / p.G;
      const uint32_t* ab = p.anc + int64_t(t) * aw;
      const int depth = kGather ? step_depth(ab, aw) : 0;
      constexpr int PER = BN / 32;
      float sv[PER];
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < PER; ++i) {
        const int c = lane + 32 * i, j = kbase + c;
        bool ok = j < L;
        if (!ok && j < Ltot) ok = kGather ? j - L <= depth : ((ab[(j - L) >> 5] >> ((j - L) & 31)) & 1u);
        sv[i] = ok ? sS[r * C::LDS + c] * p.scale_log2 : -INFINITY;
        mx = fmaxf(mx, sv[i]);
      }
      mx = warp_max(mx);
      const float m_old = sM[r];
      const float m_new = fmaxf(m_old, mx);
      float alpha = 1.f, sum = 0.f;
      if (m_new != -INFINITY) {
        alpha = exp2f(m_old - m_new);  // m_old = -inf: 0
#pragma unroll
        for (int i = 0; i < PER; ++i) {
          sv[i] = exp2f(sv[i] - m_new);
          sum += sv[i];
        }
      } else {
#pragma unroll
        for (int i = 0; i < PER; ++i) sv[i] = 0.f;
      }
#pragma unroll
      for (int i = 0; i < PER; ++i) sP[r * C::LDP + lane + 32 * i] = from_f<PT>(sv[i]);
      sum = warp_sum(sum);
      if (alpha != 1.f)
        for (int d = lane; d < DP; d += 32) sO[r * C::LDO + d] *= alpha;
      __syncwarp();
      if (lane == 0) {
        sM[r] = m_new;
        sL[r] = sL[r] * alpha + sum;
      }
    }
    cp_async_wait<1>();  // V(tile) landed (K(tile+1) may still be in flight)
    __syncthreads();

    // ---- O += P V ----
    if constexpr (C::kMma) {
      using namespace nvcuda;
      constexpr int KT = BN / 16;
      for (int ti = warp; ti < mt_n * kt_n; ti += C::kWarps) {
        const int mi = ti / kt_n, ni = ti - mi * kt_n;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::load_matrix_sync(acc, sO + mi * 16 * C::LDO + ni * 16, C::LDO, wmma::mem_row_major);
#pragma unroll
        for (int k = 0; k < KT; ++k) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::row_major> fb;
          wmma::load_matrix_sync(fa, sP + mi * 16 * C::LDP + k * 16, C::LDP);
          wmma::load_matrix_sync(fb, sV + k * 16 * C::LDE + ni * 16, C::LDE);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(sO + mi * 16 * C::LDO + ni * 16, acc, C::LDO, wmma::mem_row_major);
      }
    } else {
      const int nr = mt_n * 16;
      for (int idx = tid; idx < nr * D; idx += C::kThreads) {
        const int r = idx / D, d = idx - r * D;
        const float* pr = sP + r * C::LDP;
        const E* vcol = sV + d;
        const int gr = r0 + r;
        const uint32_t* ab = p.anc + int64_t(gr < rows ? gr / p.G : 0) * aw;
        float o = sO[r * C::LDO + d];
        for (int c = 0; c < BN; ++c) {
          const int j = kbase + c;
          float v;
          if (j < L) {
            v = to_f(vcol[c * C::LDE]);
          } else {  // the row's ancestor at depth j - L; past the token every probability is 0: stop
            const int a = gr < rows ? kth_ancestor(ab, aw, j - L) : -1;
            if (a < 0) break;
            v = to_f(vn[int64_t(a) * p.vn_st + int64_t(hk) * p.vn_sh + d]);
          }
          o = fmaf(pr[c], v, o);
        }
        sO[r * C::LDO + d] = o;
      }
    }
    __syncthreads();  // V buffer and P free
    if (tile + 1 < t_end)
      load_kv_tile<E, DP, BM, MMA>(sV, vc, p.vc_st, p.vc_sh, vn, p.vn_st, p.vn_sh, hk, tile + 1, L, Ltot, D, kGather);
    cp_async_commit();  // group: V(tile+1) (maybe empty)
  }
  cp_async_wait<0>();
  __syncthreads();

  // ---- epilogue ----
  for (int r = warp; r < BM; r += C::kWarps) {
    const int gr = r0 + r;
    if (gr >= rows) break;
    const int t = gr / p.G, qh = hk * p.G + (gr - t * p.G);
    const float l = sL[r];
    const float inv = l > 0.f ? 1.f / l : 0.f;
    if (p.splits == 1) {
      E* o = static_cast<E*>(p.out) + int64_t(t) * p.o_st + int64_t(qh) * p.o_sh;
      for (int d = lane; d < D; d += 32) o[d] = from_f<E>(sO[r * C::LDO + d] * inv);
    } else {
      const int64_t prow = int64_t(split) * p.T * p.Hq + int64_t(t) * p.Hq + qh;
      float* po = p.part_o + prow * D;
      for (int d = lane; d < D; d += 32) po[d] = sO[r * C::LDO + d] * inv;
      if (lane == 0) p.part_lse[prow] = l > 0.f ? sM[r] + log2f(l) : -INFINITY;
    }
  }
}

// Raises the kernel's dynamic shared memory limit to `bytes` on the current device (once per kernel and device).
cudaError_t ensure_smem_limit(const void* kernel, int bytes);  // step_attention.cu

template <class E, int DP, int BM, bool MMA>
cudaError_t launch_attention_cfg(const AttnParams& p, cudaStream_t stream) {
  using C = AttnCfg<E, DP, BM, MMA>;
  const void* kfn = reinterpret_cast<const void*>(&step_attention_kernel<E, DP, BM, MMA>);
  if (C::bytes > 48 * 1024) {
    const cudaError_t e = ensure_smem_limit(kfn, int(C::bytes));
    if (e != cudaSuccess) return e;
  }
  const int rows = p.T * p.G;
  // Slot mode: each slot's rows start a new tile, so at most nseg more tiles than one cache needs.
  dim3 grid((rows + BM - 1) / BM + (p.seg ? p.nseg : 0), p.Hkv, p.splits);
  LA_LAUNCH(grid, C::kThreads, C::bytes, stream, step_attention_kernel<E, DP, BM, MMA>)(p);
  return cudaGetLastError();
}

// The device's opt-in dynamic shared memory per block (cached per device; step_attention.cu).
size_t smem_optin();

// Picks the padded head dim and the row tile (attn_row_tile: 64 rows only where the device's opt-in shared memory
// holds them, so sm_86/89 parts run the 16-row configuration where the 64-row one does not fit).
template <class E, bool MMA>
cudaError_t launch_attention_path(const AttnParams& p, cudaStream_t stream) {
  const bool small = attn_row_tile(p.T * p.G, int(sizeof(E)), p.D, smem_optin(), MMA) == 16;
#define LA_ATTN_CASE(DPV)                                                                                    \
  return small ? launch_attention_cfg<E, DPV, 16, MMA>(p, stream) : launch_attention_cfg<E, DPV, 64, MMA>(p, stream)
  switch (attn_padded_dim(p.D)) {
    case 16: LA_ATTN_CASE(16);
    case 64: LA_ATTN_CASE(64);
    case 80: LA_ATTN_CASE(80);
    case 128: LA_ATTN_CASE(128);
    default: break;
  }
#undef LA_ATTN_CASE
  return cudaErrorInvalidValue;
}

// The scalar (batch-invariant) path, or for 16-bit types with `mma` the WMMA one (fp32 has no WMMA path: ignored).
template <class E>
cudaError_t launch_attention_typed(const AttnParams& p, bool mma, cudaStream_t stream) {
  if constexpr (sizeof(E) == 2) {
    if (mma) return launch_attention_path<E, true>(p, stream);
  }
  return launch_attention_path<E, false>(p, stream);
}

// Defined in the per-type translation units.
cudaError_t launch_attention_f32(const AttnParams& p, bool mma, cudaStream_t stream);
cudaError_t launch_attention_f16(const AttnParams& p, bool mma, cudaStream_t stream);
cudaError_t launch_attention_bf16(const AttnParams& p, bool mma, cudaStream_t stream);

}  // namespace la::kern::detail
