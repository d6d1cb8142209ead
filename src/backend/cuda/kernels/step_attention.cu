// Step attention: argument checks, split plan and the split combine kernel.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "step_attention.cuh"

namespace la::kern {

size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

namespace detail {

cudaError_t ensure_smem_limit(const void* kernel, int bytes) {
  static std::mutex mu;
  static std::set<std::pair<const void*, int>> done;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lk(mu);
  if (done.count({kernel, dev})) return cudaSuccess;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) done.insert({kernel, dev});
  return e;
}

namespace {

// Per-device attributes, read once per device.
int device_attr(cudaDeviceAttr attr, int fallback) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int> cached;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return fallback;
  std::lock_guard<std::mutex> lk(mu);
  auto it = cached.find({dev, int(attr)});
  if (it != cached.end()) return it->second;
  int n = 0;
  if (cudaDeviceGetAttribute(&n, attr, dev) != cudaSuccess || n <= 0) n = fallback;
  cached[{dev, int(attr)}] = n;
  return n;
}

// One warp per (token, query head) row: merges the splits' normalised partials by their log-sum-exps.
template <class E>
__global__ void combine_kernel(const float* __restrict__ part_o, const float* __restrict__ part_lse, int splits,
                               int T, int Hq, int D, E* __restrict__ out, int64_t o_st, int64_t o_sh) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * (blockDim.x >> 5) + warp;
  const int nrows = T * Hq;
  if (row >= nrows) return;
  float mx = -INFINITY;
  for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, part_lse[int64_t(s) * nrows + row]);
  mx = warp_max(mx);
  constexpr int kMaxPer = 4;  // D <= 128
  float acc[kMaxPer] = {0.f, 0.f, 0.f, 0.f};
  float wsum = 0.f;
  if (mx != -INFINITY) {
    for (int s = 0; s < splits; ++s) {
      const float lse = part_lse[int64_t(s) * nrows + row];
      if (lse == -INFINITY) continue;
      const float w = exp2f(lse - mx);
      wsum += w;
      const float* po = part_o + (int64_t(s) * nrows + row) * D;
#pragma unroll
      for (int i = 0; i < kMaxPer; ++i) {
        const int d = lane + 32 * i;
        if (d < D) acc[i] = fmaf(w, po[d], acc[i]);
      }
    }
  }
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  const int t = row / Hq, h = row - t * Hq;
  E* o = out + int64_t(t) * o_st + int64_t(h) * o_sh;
#pragma unroll
  for (int i = 0; i < kMaxPer; ++i) {
    const int d = lane + 32 * i;
    if (d < D) o[d] = from_f<E>(acc[i] * inv);
  }
}

size_t al256(size_t x) { return (x + 255) / 256 * 256; }

bool row_ok(const void* p, int64_t st_t, int64_t st_h, size_t esize) {
  return p != nullptr && aligned16(p) && (st_t * int64_t(esize)) % 16 == 0 && (st_h * int64_t(esize)) % 16 == 0;
}

}  // namespace

// 48 KiB (the limit without opt-in) if the attribute cannot be read.
size_t smem_optin() { return size_t(device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, 48 * 1024)); }

}  // namespace detail

size_t step_attention_workspace_bytes(int T, int Hq, int D, int splits) {
  return attn_workspace_bytes(T, Hq, D, splits);
}

int step_attention_splits(const StepAttentionArgs& a) {
  return attn_splits(a.cache_len_dev || a.slot_seg ? a.max_cache_len : a.cache_len, a.T, a.split_keys ? a.split_keys : kAttnSplitKeys);
}

cudaError_t launch_step_attention(const StepAttentionArgs& a, cudaStream_t stream) {
  using namespace detail;
  if (a.T <= 0 || a.Hq <= 0 || a.Hkv <= 0 || a.Hq % a.Hkv || a.D <= 0 || a.D > 128) return cudaErrorInvalidValue;
  const size_t es = dtype_size(a.dtype);
  if ((a.D * es) % 16) return cudaErrorInvalidValue;
  if (a.cache_len < 0 || (a.cache_len_dev && a.max_cache_len < 0)) return cudaErrorInvalidValue;
  const bool slots = a.slot_seg != nullptr;
  if (slots && (a.slots <= 0 || !a.slot_caches || a.max_cache_len < 0 || (a.fast_mma && a.dtype != DType::F32)))
    return cudaErrorInvalidValue;  // slot mode: the scalar path only (it reads step keys by position)
  const bool need_cache = !slots && (a.cache_len_dev ? a.max_cache_len > 0 : a.cache_len > 0);
  if (slots && ((a.kc_stride_t * es) % 16 || (a.kc_stride_h * es) % 16 || (a.vc_stride_t * es) % 16 ||
                (a.vc_stride_h * es) % 16))
    return cudaErrorInvalidValue;
  if (!row_ok(a.q, a.q_stride_t, a.q_stride_h, es) || !row_ok(a.k_new, a.kn_stride_t, a.kn_stride_h, es) ||
      !row_ok(a.v_new, a.vn_stride_t, a.vn_stride_h, es) || !a.out || !a.anc_bits)
    return cudaErrorInvalidValue;
  if (need_cache && (!row_ok(a.k_cache, a.kc_stride_t, a.kc_stride_h, es) ||
                     !row_ok(a.v_cache, a.vc_stride_t, a.vc_stride_h, es)))
    return cudaErrorInvalidValue;

  AttnParams p{};
  p.q = a.q;
  p.q_st = a.q_stride_t;
  p.q_sh = a.q_stride_h;
  p.kc = a.k_cache;
  p.kc_st = a.kc_stride_t;
  p.kc_sh = a.kc_stride_h;
  p.vc = a.v_cache;
  p.vc_st = a.vc_stride_t;
  p.vc_sh = a.vc_stride_h;
  p.kn = a.k_new;
  p.kn_st = a.kn_stride_t;
  p.kn_sh = a.kn_stride_h;
  p.vn = a.v_new;
  p.vn_st = a.vn_stride_t;
  p.vn_sh = a.vn_stride_h;
  p.anc = a.anc_bits;
  p.anc_words = ancestor_words(a.T);
  p.out = a.out;
  p.o_st = a.o_stride_t;
  p.o_sh = a.o_stride_h;
  p.T = a.T;
  p.Hq = a.Hq;
  p.Hkv = a.Hkv;
  p.G = a.Hq / a.Hkv;
  p.D = a.D;
  p.cache_len = a.cache_len;
  p.cache_len_dev = a.cache_len_dev;
  p.max_cache_len = a.max_cache_len;
  p.seg = a.slot_seg;
  p.slot_kv = a.slot_caches;
  p.nseg = slots ? a.slots : 0;
  p.splits = step_attention_splits(a);
  if (p.splits <= 0) return cudaErrorInvalidValue;  // split_keys not a positive multiple of 64
  const bool mma = a.fast_mma && a.dtype != DType::F32;  // fp32 has only the scalar path
  p.split_tiles = (a.split_keys ? a.split_keys : kAttnSplitKeys) / (mma ? 64 : 32);  // split_keys / key tile
  p.scale_log2 = a.scale * 1.4426950408889634f;
  if (p.splits > 1) {
    // Never fewer splits for a small workspace: the split boundaries are what keeps the result batch-invariant.
    if (!a.workspace || a.workspace_bytes < attn_workspace_bytes(a.T, a.Hq, a.D, p.splits))
      return cudaErrorInvalidValue;
    const size_t rows = size_t(a.T) * a.Hq * p.splits;
    p.part_o = static_cast<float*>(a.workspace);
    p.part_lse = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + al256(rows * a.D * sizeof(float)));
  }

  cudaError_t e = cudaErrorInvalidValue;
  switch (a.dtype) {
    case DType::F32: e = launch_attention_f32(p, false, stream); break;
    case DType::F16: e = launch_attention_f16(p, mma, stream); break;
    case DType::BF16: e = launch_attention_bf16(p, mma, stream); break;
  }
  if (e != cudaSuccess || p.splits == 1) return e;

  const int nrows = a.T * a.Hq, warps = 4;
  const dim3 grid((nrows + warps - 1) / warps);
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using E = decltype(tag);
    LA_LAUNCH(grid, 32 * warps, 0, stream, combine_kernel<E>)(p.part_o, p.part_lse, p.splits, a.T, a.Hq, a.D,
                                                              static_cast<E*>(a.out), a.o_stride_t, a.o_stride_h);
    return cudaGetLastError();
  });
}

}  // namespace la::kern
