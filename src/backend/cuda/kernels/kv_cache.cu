// KV-cache writes for the CUDA forward: the step's K/V appended at a cache length read from device memory (so a
// captured graph serves every length), and the commit of an accepted path (rows gathered in place, all layers in
// one launch). Plain copies: the element type only matters for its size.
#include <cstdint>

#include "common.cuh"
#include "kv_cache.h"

namespace la::kern {
namespace detail {
namespace {

template <class W>  // W: an unsigned integer of the element size
__global__ void kv_append_kernel(int T, int Hkv, int D, const W* __restrict__ kn, int64_t kn_st, int64_t kn_sh,
                                 const W* __restrict__ vn, int64_t vn_st, int64_t vn_sh, W* __restrict__ kc,
                                 W* __restrict__ vc, int64_t c_st, int64_t c_sh, const int32_t* __restrict__ len_dev,
                                 int cache_rows) {
  const int t = blockIdx.x;
  const bool is_v = blockIdx.y != 0;
  const int64_t row = int64_t(*len_dev) + t;
  if (t >= T || row < 0 || row >= cache_rows) return;
  const W* src = is_v ? vn + int64_t(t) * vn_st : kn + int64_t(t) * kn_st;
  const int64_t src_sh = is_v ? vn_sh : kn_sh;
  W* dst = (is_v ? vc : kc) + row * c_st;
  for (int e = threadIdx.x; e < Hkv * D; e += blockDim.x) {
    const int h = e / D, d = e - h * D;
    dst[int64_t(h) * c_sh + d] = src[int64_t(h) * src_sh + d];
  }
}

// Slot mode: the slot holding step row t is found by a scan of the (few) slots' row ranges.
template <class W>
__global__ void kv_append_slots_kernel(int T, int Hkv, int D, const W* __restrict__ kn, int64_t kn_st, int64_t kn_sh,
                                       const W* __restrict__ vn, int64_t vn_st, int64_t vn_sh,
                                       W* const* __restrict__ caches, int64_t c_st, int64_t c_sh,
                                       const int32_t* __restrict__ seg, int nseg) {
  const int t = blockIdx.x;
  const bool is_v = blockIdx.y != 0;
  if (t >= T) return;
  int s = 0;
  while (s < nseg && !(t >= seg[4 * s] && t < seg[4 * s] + seg[4 * s + 1])) ++s;
  if (s == nseg) return;  // a padding row
  const int64_t row = int64_t(seg[4 * s + 2]) + (t - seg[4 * s]);
  if (row < 0 || row >= seg[4 * s + 3]) return;
  const W* src = is_v ? vn + int64_t(t) * vn_st : kn + int64_t(t) * kn_st;
  const int64_t src_sh = is_v ? vn_sh : kn_sh;
  W* dst = caches[is_v ? nseg + s : s] + row * c_st;
  for (int e = threadIdx.x; e < Hkv * D; e += blockDim.x) {
    const int h = e / D, d = e - h * D;
    dst[int64_t(h) * c_sh + d] = src[int64_t(h) * src_sh + d];
  }
}

// One block per (layer, K or V) cache. Rows are copied one after another in path order: row len+j is read as
// the source of a later row j' only if src[j'] == j, impossible as src[j'] >= j' > j; and row len+src[j] is
// written only as destination j'' = src[j] >= j, after step j read it. So sequential order is race-free.
template <class W>
__global__ void kv_commit_kernel(W* const* __restrict__ caches, int64_t row_elems, int len,
                                 const int32_t* __restrict__ src, int m) {
  W* base = caches[blockIdx.x];
  for (int j = 0; j < m; ++j) {
    const int s = src[j];
    if (s != j) {
      const W* from = base + int64_t(len + s) * row_elems;
      W* to = base + int64_t(len + j) * row_elems;
      for (int64_t e = threadIdx.x; e < row_elems; e += blockDim.x) to[e] = from[e];
    }
    __syncthreads();
  }
}

template <class F>
cudaError_t dispatch_width(DType dt, F&& f) {
  switch (dtype_size(dt)) {
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace
}  // namespace detail

cudaError_t launch_kv_append(DType dt, int T, int Hkv, int D, const void* k_new, int64_t kn_stride_t,
                             int64_t kn_stride_h, const void* v_new, int64_t vn_stride_t, int64_t vn_stride_h,
                             void* k_cache, void* v_cache, int64_t c_stride_t, int64_t c_stride_h,
                             const int32_t* cache_len_dev, int cache_rows, cudaStream_t stream) {
  if (T < 0 || Hkv <= 0 || D <= 0 || cache_rows < 0) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  if (!k_new || !v_new || !k_cache || !v_cache || !cache_len_dev) return cudaErrorInvalidValue;
  return detail::dispatch_width(dt, [&](auto tag) {
    using W = decltype(tag);
    LA_LAUNCH(dim3(T, 2), 128, 0, stream, detail::kv_append_kernel<W>)(
        T, Hkv, D, static_cast<const W*>(k_new), kn_stride_t, kn_stride_h, static_cast<const W*>(v_new), vn_stride_t,
        vn_stride_h, static_cast<W*>(k_cache), static_cast<W*>(v_cache), c_stride_t, c_stride_h, cache_len_dev,
        cache_rows);
    return cudaGetLastError();
  });
}

cudaError_t launch_kv_append_slots(DType dt, int T, int Hkv, int D, const void* k_new, int64_t kn_stride_t,
                                   int64_t kn_stride_h, const void* v_new, int64_t vn_stride_t, int64_t vn_stride_h,
                                   void* const* cache_ptrs_dev, int64_t c_stride_t, int64_t c_stride_h,
                                   const int32_t* slot_seg_dev, int slots, cudaStream_t stream) {
  if (T < 0 || Hkv <= 0 || D <= 0 || slots <= 0) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  if (!k_new || !v_new || !cache_ptrs_dev || !slot_seg_dev) return cudaErrorInvalidValue;
  return detail::dispatch_width(dt, [&](auto tag) {
    using W = decltype(tag);
    LA_LAUNCH(dim3(T, 2), 128, 0, stream, detail::kv_append_slots_kernel<W>)(
        T, Hkv, D, static_cast<const W*>(k_new), kn_stride_t, kn_stride_h, static_cast<const W*>(v_new), vn_stride_t,
        vn_stride_h, reinterpret_cast<W* const*>(cache_ptrs_dev), c_stride_t, c_stride_h, slot_seg_dev, slots);
    return cudaGetLastError();
  });
}

cudaError_t launch_kv_commit(DType dt, int caches, void* const* cache_ptrs_dev, int64_t row_elems, int len,
                             const int32_t* src_dev, int m, cudaStream_t stream) {
  if (caches < 0 || row_elems <= 0 || len < 0 || m < 0) return cudaErrorInvalidValue;
  if (caches == 0 || m == 0) return cudaSuccess;
  if (!cache_ptrs_dev || !src_dev) return cudaErrorInvalidValue;
  return detail::dispatch_width(dt, [&](auto tag) {
    using W = decltype(tag);
    LA_LAUNCH(caches, 256, 0, stream, detail::kv_commit_kernel<W>)(reinterpret_cast<W* const*>(cache_ptrs_dev), row_elems,
                                                             len, src_dev, m);
    return cudaGetLastError();
  });
}

}  // namespace la::kern
