// Launchers of the KV cache kernels (kv_cache.cu); conventions in kernel_types.h.
#pragma once
#include "kernel_types.h"

namespace la::kern {

// KV cache (kv_cache.cu). Caches are [rows, Hkv, D] with unit stride over D.

// k_cache[len + t, h, :] = k_new[t, h, :] and the same for v, for t < T, with len = *cache_len_dev read on the
// device (one captured graph serves every cache length). Rows at or past cache_rows are skipped.
cudaError_t launch_kv_append(DType dt, int T, int Hkv, int D, const void* k_new, int64_t kn_stride_t,
                             int64_t kn_stride_h, const void* v_new, int64_t vn_stride_t, int64_t vn_stride_h,
                             void* k_cache, void* v_cache, int64_t c_stride_t, int64_t c_stride_h,
                             const int32_t* cache_len_dev, int cache_rows, cudaStream_t stream);

// The same for a batched step over several slots (each a request's cache; layout of StepAttentionArgs' slot mode):
// step row t of slot s (first_s <= t < first_s + tokens_s) goes to row len_s + t - first_s of slot s's caches
// (cache_ptrs_dev: 2 x slots pointers, the K bases then the V bases), rows at or past the slot's cache rows are
// skipped, and step rows of no slot (padding) are not written. A plain copy: bit-exact whatever the neighbours.
cudaError_t launch_kv_append_slots(DType dt, int T, int Hkv, int D, const void* k_new, int64_t kn_stride_t,
                                   int64_t kn_stride_h, const void* v_new, int64_t vn_stride_t, int64_t vn_stride_h,
                                   void* const* cache_ptrs_dev, int64_t c_stride_t, int64_t c_stride_h,
                                   const int32_t* slot_seg_dev, int slots, cudaStream_t stream);

// Commit of an accepted path: in each of `caches` contiguous caches (device array of base pointers, e.g. every
// layer's K and V), row len + j <- row len + src[j] for j < m, in order. src (device, m ints) must be strictly
// increasing with src[j] >= j (a root-to-node path of the last step) and len + src[m-1] inside the cache.
cudaError_t launch_kv_commit(DType dt, int caches, void* const* cache_ptrs_dev, int64_t row_elems, int len,
                             const int32_t* src_dev, int m, cudaStream_t stream);

}  // namespace la::kern
