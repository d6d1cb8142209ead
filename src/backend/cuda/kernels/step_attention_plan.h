// Host-only planning of the step attention launch: the shared-memory layout of each kernel configuration, the row
// tile chosen by the device's opt-in shared-memory limit, and the flash-decoding split count. Plain C++ (no CUDA
// headers), so that the same code nvcc compiles into the launcher is also tested on machines without a GPU
// (tests/cuda_static/test_cuda_host.cpp) and its layout invariants are static_asserts here.
#pragma once
#include <algorithm>
#include <cstddef>

namespace la::kern {

// Shared-memory layout of step_attention_kernel<E, DP, BM, MMA> for an element of ES bytes, padded head dim DP and
// BM query rows per CTA. Offsets in bytes. Two arithmetic paths:
//  * MMA = false (fp32, and fp16/bf16 by default): scalar fp32 FMAs on widened elements, 32-key tiles, fp32
//    probabilities; the batch-invariant path (step_attention.cuh: a row's step keys taken by position);
//  * MMA = true (fp16/bf16 with StepAttentionArgs::fast_mma only): WMMA m16n16k16 with fp32 accumulators, 64-key
//    tiles, 16-bit probabilities.
// MMA defaults to ES == 2 (the WMMA layout for 16-bit) for callers that predate the scalar 16-bit path.
template <int ES, int DP, int BM, bool MMA = ES == 2>
struct AttnLayout {
  static_assert(ES == 2 || ES == 4, "fp32 or a 16-bit element");
  static_assert(!MMA || ES == 2, "WMMA only for fp16/bf16");
  static constexpr bool kMma = MMA;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int BN = kMma ? 64 : 32;  // keys per tile
  static constexpr int kVec = 16 / ES;       // elements per 16-byte chunk (one cp.async)
  static constexpr int PS = kMma ? ES : 4;   // bytes of a probability: the WMMA operand type, else fp32
  static constexpr int LDE = DP + kVec;      // Q/K/V row pitch (elements): +16 bytes against bank conflicts
  static constexpr int LDS = BN + 4;         // scores (fp32)
  static constexpr int LDP = BN + 16 / PS;   // probabilities (PS bytes each)
  static constexpr int LDO = DP + 4;         // output accumulator (fp32)
  static constexpr size_t al(size_t x) { return (x + 127) / 128 * 128; }
  static constexpr size_t offQ = 0;
  static constexpr size_t offK = al(offQ + size_t(BM) * LDE * ES);
  static constexpr size_t offV = al(offK + size_t(BN) * LDE * ES);
  static constexpr size_t offS = al(offV + size_t(BN) * LDE * ES);
  static constexpr size_t offP = al(offS + size_t(BM) * LDS * sizeof(float));
  static constexpr size_t offO = al(offP + size_t(BM) * LDP * PS);
  static constexpr size_t offM = al(offO + size_t(BM) * LDO * sizeof(float));
  static constexpr size_t offL = offM + size_t(BM) * sizeof(float);
  static constexpr size_t bytes = al(offL + size_t(BM) * sizeof(float));

  // What the kernel relies on (checked at compile time for every instantiated configuration):
  static_assert(DP % 16 == 0 && BM % 16 == 0 && BN % 16 == 0, "WMMA 16x16 tiles");
  static_assert((LDE * ES) % 16 == 0 && (LDP * PS) % 16 == 0, "cp.async / uint4 rows: 16-byte row pitch");
  // WMMA: ldm a multiple of 8 elements for 16-bit fragments and of 4 for fp32 accumulators; every fragment pointer
  // (row 16*i, column 16*j) 32-byte aligned, i.e. 16 rows of each pitch a multiple of 32 bytes.
  static_assert(!kMma || (LDE % 8 == 0 && LDP % 8 == 0), "WMMA ldm of 16-bit operands");
  static_assert(LDS % 4 == 0 && LDO % 4 == 0, "WMMA ldm of fp32 accumulators");
  static_assert((16 * LDE * ES) % 32 == 0 && (16 * LDP * PS) % 32 == 0 && (16 * LDS * 4) % 32 == 0 &&
                    (16 * LDO * 4) % 32 == 0,
                "WMMA fragment pointers 32-byte aligned");
  static_assert(offK % 128 == 0 && offV % 128 == 0 && offS % 128 == 0 && offP % 128 == 0 && offO % 128 == 0 &&
                    offM % 128 == 0,
                "regions 128-byte aligned");
  static_assert(offK >= offQ + size_t(BM) * LDE * ES && offV >= offK + size_t(BN) * LDE * ES &&
                    offS >= offV + size_t(BN) * LDE * ES && offP >= offS + size_t(BM) * LDS * 4 &&
                    offO >= offP + size_t(BM) * LDP * PS && offM >= offO + size_t(BM) * LDO * 4 &&
                    bytes >= offL + size_t(BM) * 4,
                "regions do not overlap");
  static_assert(bytes % 16 == 0, "the kernel zeroes shared memory in 16-byte words");
  static_assert(bytes <= 227 * 1024, "above the largest opt-in shared memory of any target (sm_90: 227 KiB)");
  // BM = 16 must fit every sm_80+ part (sm_86/89: 99 KiB opt-in) since it is the fallback of the 64-row tile.
  static_assert(BM != 16 || bytes <= 99 * 1024, "the 16-row tile must fit sm_86/89 (99 KiB)");
};

// Padded head dims the kernel is instantiated for; 0 when D is not supported.
inline int attn_padded_dim(int D) {
  if (D <= 0) return 0;
  if (D <= 16) return 16;
  if (D <= 64) return 64;
  if (D <= 80) return 80;
  if (D <= 128) return 128;
  return 0;
}

template <int ES, bool MMA>
size_t attn_smem_bytes_es(int DP, int BM) {
#define LA_ATTN_BYTES(DPV)                                                                                  \
  if (DP == DPV) return BM == 16 ? AttnLayout<ES, DPV, 16, MMA>::bytes : AttnLayout<ES, DPV, 64, MMA>::bytes;
  LA_ATTN_BYTES(16)
  LA_ATTN_BYTES(64)
  LA_ATTN_BYTES(80)
  LA_ATTN_BYTES(128)
#undef LA_ATTN_BYTES
  return 0;
}
// Dynamic shared memory of a configuration (element size 4 or 2; mma: the WMMA path, 16-bit only; its default is
// the WMMA layout for 16-bit, see AttnLayout); 0 for a configuration that does not exist.
inline size_t attn_smem_bytes(int es, int DP, int BM, bool mma) {
  if (BM != 16 && BM != 64) return 0;
  if (es == 4) return mma ? 0 : attn_smem_bytes_es<4, false>(DP, BM);
  if (es == 2) return mma ? attn_smem_bytes_es<2, true>(DP, BM) : attn_smem_bytes_es<2, false>(DP, BM);
  return 0;
}
inline size_t attn_smem_bytes(int es, int DP, int BM) { return attn_smem_bytes(es, DP, BM, es == 2); }

// Query rows per CTA: 16 for small steps (rows = T * heads per KV head <= 16), else 64 when its shared memory fits
// the device's opt-in limit (cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KiB on sm_90, 163 KiB on sm_80, 99 KiB
// on sm_86/89, where the 64-row fp32 and WMMA tiles (110-118 KiB at D = 128) do not fit; the scalar 16-bit one,
// 86 KiB at D = 128, does), else 16.
inline int attn_row_tile(int rows, int es, int D, size_t smem_optin, bool mma) {
  if (rows <= 16) return 16;
  return attn_smem_bytes(es, attn_padded_dim(D), 64, mma) <= smem_optin ? 64 : 16;
}
inline int attn_row_tile(int rows, int es, int D, size_t smem_optin) {
  return attn_row_tile(rows, es, D, smem_optin, es == 2);
}

// Workspace bytes for `splits` partial outputs (fp32 [splits][T*Hq][D] + log-sum-exps), 256-byte aligned parts.
inline size_t attn_workspace_bytes(int T, int Hq, int D, int splits) {
  if (T <= 0 || Hq <= 0 || D <= 0 || splits <= 1) return 0;
  const size_t rows = size_t(T) * Hq * splits;
  auto al256 = [](size_t x) { return (x + 255) / 256 * 256; };
  return al256(rows * D * sizeof(float)) + al256(rows * sizeof(float));
}

// Flash-decoding splits, fixed by ABSOLUTE key position (batch invariance): split s covers the key positions
// [s * split_keys, (s + 1) * split_keys) and its tiles start at multiples of the tile width from position 0, so a
// query row's keys are grouped into the same tiles and splits, and the splits' partials are merged in the same
// order (split 0 first), whatever the step size T, the row tile or the cache length (and, on the scalar path, the
// tree: the kernel reads a row's step keys by position, step_attention.cuh). The launch has
// attn_splits(...) splits; splits holding none of a row's keys produce an empty partial (log-sum-exp -inf) that
// the combine skips, which changes no bit. split_keys is a constant of the model instance (attn_split_keys of its
// maximum context), never of the step.
inline constexpr int kAttnSplitKeys = 512;  // StepAttentionArgs::split_keys = 0
// Keys per split for a model whose cache holds at most max_keys keys (plus a step): the smallest 256 * 2^k with at
// most 16 splits, so that the workspace stays bounded (16 partials per row) at any context.
inline int attn_split_keys(long long max_keys) {
  long long k = 256;
  while ((std::max(max_keys, 0LL) + k - 1) / k > 16) k *= 2;
  return int(k);
}
// The launch's split count: enough splits for the largest cache length the launch may see (max_len: the cache
// length, or the capacity for a device-side length) plus the step. 0 for invalid split_keys (not a positive
// multiple of 64, the widest key tile).
inline int attn_splits(int max_len, int T, int split_keys) {
  if (split_keys <= 0 || split_keys % 64) return 0;
  const long long keys = (long long)std::max(max_len, 0) + std::max(T, 0);
  return int(std::max(1LL, (keys + split_keys - 1) / split_keys));
}

}  // namespace la::kern
