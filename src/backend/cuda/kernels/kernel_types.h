// Types and conventions shared by the launchers of the lookahead CUDA kernels (one header per kernel beside
// this one: step_attention.h, ops.h, kv_cache.h, verify.h). Plain C++ (no libtorch): raw device pointers, sizes,
// strides in elements, and a stream. Every launcher only enqueues work (no synchronisation, no allocation, no host<->device
// copy), so all of them can be captured into a CUDA graph, and returns cudaSuccess or the launch error
// (cudaErrorInvalidValue for bad arguments). Element types: fp32, fp16, bf16; arithmetic is fp32.
//
// Conventions shared by the kernels:
//  * A step has T new tokens. parents[i] < i is token i's parent among the step tokens, or -1 (root: it sees the
//    committed cache only). Token i attends to the whole committed cache plus its ancestors, itself included.
//    A parent that is not in [-1, i) ends the ancestor walk (treated as -1).
//  * The mask among step tokens is packed ancestor bits: bits[i * words + (j >> 5)] has bit (j & 31) set iff j is
//    i or an ancestor of i, words = ancestor_words(T). The host packs them (la::pack_ancestor_bits,
//    lookahead/backend/cuda/step_layout.h) and uploads them with the step; every layer reuses them.
//  * Padding a step to a fixed size (CUDA graph buckets): padding tokens go after the real ones with parent -1
//    (and verify flag 0). Real tokens never have them as ancestors, so real outputs do not change; the padding
//    rows' outputs are garbage-free but meaningless and must be ignored (and never committed to the cache).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace la::kern {

enum class DType : int { F32 = 0, F16 = 1, BF16 = 2 };
size_t dtype_size(DType t);
const char* dtype_name(DType t);

// Words of packed ancestor bits per step row.
inline int ancestor_words(int T) { return (T + 31) / 32; }

}  // namespace la::kern
