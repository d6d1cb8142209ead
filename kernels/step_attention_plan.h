// Host-only planning of the step attention launch: the shared-memory layout of each kernel configuration, the row
// tile chosen by the device's opt-in shared-memory limit, and the flash-decoding split count. Plain C++ (no CUDA
// headers), so that the same code nvcc compiles into the launcher is also tested on machines without a GPU
// (tests/cuda_static/test_attention_plan.cpp) and its layout invariants are static_asserts here.
#pragma once
#include <algorithm>
#include <cstddef>

namespace la::kern {

// Shared-memory layout of step_attention_kernel<E, DP, BM> for an element of ES bytes (4: fp32 with scalar FMAs,
// 2: fp16/bf16 with WMMA m16n16k16), padded head dim DP and BM query rows per CTA. Offsets in bytes.
template <int ES, int DP, int BM>
struct AttnLayout {
  static constexpr bool kMma = ES == 2;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int BN = kMma ? 64 : 32;  // keys per tile
  static constexpr int kVec = 16 / ES;       // elements per 16-byte chunk (one cp.async)
  static constexpr int LDE = DP + kVec;      // Q/K/V row pitch (elements): +16 bytes against bank conflicts
  static constexpr int LDS = BN + 4;         // scores (fp32)
  static constexpr int LDP = BN + kVec;      // probabilities (E)
  static constexpr int LDO = DP + 4;         // output accumulator (fp32)
  static constexpr size_t al(size_t x) { return (x + 127) / 128 * 128; }
  static constexpr size_t offQ = 0;
  static constexpr size_t offK = al(offQ + size_t(BM) * LDE * ES);
  static constexpr size_t offV = al(offK + size_t(BN) * LDE * ES);
  static constexpr size_t offS = al(offV + size_t(BN) * LDE * ES);
  static constexpr size_t offP = al(offS + size_t(BM) * LDS * sizeof(float));
  static constexpr size_t offO = al(offP + size_t(BM) * LDP * ES);
  static constexpr size_t offM = al(offO + size_t(BM) * LDO * sizeof(float));
  static constexpr size_t offL = offM + size_t(BM) * sizeof(float);
  static constexpr size_t bytes = al(offL + size_t(BM) * sizeof(float));

  // What the kernel relies on (checked at compile time for every instantiated configuration):
  static_assert(DP % 16 == 0 && BM % 16 == 0 && BN % 16 == 0, "WMMA 16x16 tiles");
  static_assert((LDE * ES) % 16 == 0 && (LDP * ES) % 16 == 0, "cp.async / uint4 rows: 16-byte row pitch");
  // WMMA: ldm a multiple of 8 elements for 16-bit fragments and of 4 for fp32 accumulators; every fragment pointer
  // (row 16*i, column 16*j) 32-byte aligned, i.e. 16 rows of each pitch a multiple of 32 bytes.
  static_assert(!kMma || (LDE % 8 == 0 && LDP % 8 == 0), "WMMA ldm of 16-bit operands");
  static_assert(LDS % 4 == 0 && LDO % 4 == 0, "WMMA ldm of fp32 accumulators");
  static_assert((16 * LDE * ES) % 32 == 0 && (16 * LDP * ES) % 32 == 0 && (16 * LDS * 4) % 32 == 0 &&
                    (16 * LDO * 4) % 32 == 0,
                "WMMA fragment pointers 32-byte aligned");
  static_assert(offK % 128 == 0 && offV % 128 == 0 && offS % 128 == 0 && offP % 128 == 0 && offO % 128 == 0 &&
                    offM % 128 == 0,
                "regions 128-byte aligned");
  static_assert(offK >= offQ + size_t(BM) * LDE * ES && offV >= offK + size_t(BN) * LDE * ES &&
                    offS >= offV + size_t(BN) * LDE * ES && offP >= offS + size_t(BM) * LDS * 4 &&
                    offO >= offP + size_t(BM) * LDP * ES && offM >= offO + size_t(BM) * LDO * 4 &&
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

template <int ES>
size_t attn_smem_bytes_es(int DP, int BM) {
#define LA_ATTN_BYTES(DPV)                                                              \
  if (DP == DPV) return BM == 16 ? AttnLayout<ES, DPV, 16>::bytes : AttnLayout<ES, DPV, 64>::bytes;
  LA_ATTN_BYTES(16)
  LA_ATTN_BYTES(64)
  LA_ATTN_BYTES(80)
  LA_ATTN_BYTES(128)
#undef LA_ATTN_BYTES
  return 0;
}
// Dynamic shared memory of a configuration (element size 4 or 2); 0 for a configuration that does not exist.
inline size_t attn_smem_bytes(int es, int DP, int BM) {
  if (BM != 16 && BM != 64) return 0;
  return es == 4 ? attn_smem_bytes_es<4>(DP, BM) : es == 2 ? attn_smem_bytes_es<2>(DP, BM) : 0;
}

// Query rows per CTA: 16 for small steps (rows = T * heads per KV head <= 16), else 64 when its shared memory fits
// the device's opt-in limit (cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KiB on sm_90, 163 KiB on sm_80, 99 KiB
// on sm_86/89, where the 64-row tiles (110-118 KiB at D = 128) do not fit), else 16.
inline int attn_row_tile(int rows, int es, int D, size_t smem_optin) {
  if (rows <= 16) return 16;
  return attn_smem_bytes(es, attn_padded_dim(D), 64) <= smem_optin ? 64 : 16;
}

// Workspace bytes for `splits` partial outputs (fp32 [splits][T*Hq][D] + log-sum-exps), 256-byte aligned parts.
inline size_t attn_workspace_bytes(int T, int Hq, int D, int splits) {
  if (T <= 0 || Hq <= 0 || D <= 0 || splits <= 1) return 0;
  const size_t rows = size_t(T) * Hq * splits;
  auto al256 = [](size_t x) { return (x + 255) / 256 * 256; };
  return al256(rows * D * sizeof(float)) + al256(rows * sizeof(float));
}

struct AttnSplitInput {
  int T = 0, Hq = 0, Hkv = 0, D = 0, es = 2;
  int max_len = 0;        // the largest cache length the launch may see (the capacity for a device length)
  int num_splits = 0;     // 0: automatic; > 0: forced (clamped)
  size_t workspace_bytes = 0;
  int sm_count = 132;
  size_t smem_optin = 227 * 1024;
};
// The flash-decoding split count: enough CTAs for `per_sm` resident CTAs on every SM, at least two key tiles per
// split, at most 64, bounded by the workspace, then evened out so that no split is empty at max_len.
inline int attn_splits(const AttnSplitInput& a) {
  if (a.T <= 0 || a.Hq <= 0 || a.Hkv <= 0 || a.D <= 0 || a.Hq % a.Hkv) return 1;
  const int G = a.Hq / a.Hkv;
  const int rows = a.T * G;
  const int BM = attn_row_tile(rows, a.es, a.D, a.smem_optin);
  const int BN = a.es == 4 ? 32 : 64;
  const int ntiles = (std::max(a.max_len, 0) + a.T + BN - 1) / BN;
  int s;
  if (a.num_splits > 0) {
    s = std::min(a.num_splits, ntiles);
  } else {
    const int base = ((rows + BM - 1) / BM) * a.Hkv;
    const int per_sm = BM == 16 ? 4 : 2;  // resident CTAs per SM (shared memory bound)
    const int target = a.sm_count * per_sm;
    s = std::min((target + base - 1) / base, ntiles / 2);
  }
  s = std::clamp(s, 1, 64);
  while (s > 1 && attn_workspace_bytes(a.T, a.Hq, a.D, s) > a.workspace_bytes) --s;
  if (s > 1) {
    const int tps = (ntiles + s - 1) / s;
    s = (ntiles + tps - 1) / tps;
  }
  return s;
}

}  // namespace la::kern
