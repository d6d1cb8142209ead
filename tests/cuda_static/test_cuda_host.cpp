// Host-only logic of the CUDA path, tested without a GPU (CTest label cuda-static): the step attention's shared-
// memory layouts (static_asserts in src/backend/cuda/kernels/step_attention_plan.h, instantiated here for every configuration),
// the row tile chosen by the device's opt-in shared-memory limit, the split count, the step buckets and the
// model-support check. The launchers call these very functions (src/backend/cuda/kernels/step_attention.cu, torch_cuda_forward.cpp).
#include <gtest/gtest.h>

#include "../../src/backend/cuda/kernels/step_attention_plan.h"
#include "../../src/backend/cuda/host/cuda_support.h"
#include "lookahead/backend/cuda/step_layout.h"

namespace la::kern {
namespace {

// Every configuration launch_attention_typed can instantiate (the static_asserts fire on instantiation).
template <int ES>
constexpr size_t all_bytes() {
  return AttnLayout<ES, 16, 16>::bytes + AttnLayout<ES, 16, 64>::bytes + AttnLayout<ES, 64, 16>::bytes +
         AttnLayout<ES, 64, 64>::bytes + AttnLayout<ES, 80, 16>::bytes + AttnLayout<ES, 80, 64>::bytes +
         AttnLayout<ES, 128, 16>::bytes + AttnLayout<ES, 128, 64>::bytes;
}
static_assert(all_bytes<2>() > 0 && all_bytes<4>() > 0);

constexpr size_t KiB = 1024, kSm86 = 99 * KiB, kSm80 = 163 * KiB, kSm90 = 227 * KiB;

TEST(CudaHost, SixtyFourRowTilesNeedMoreThanSm86Allows) {
  // The review's finding: at D = 128 the 64-row tiles take 110-118 KiB (fp16/bf16, fp32).
  EXPECT_EQ(attn_smem_bytes(2, 128, 64), (AttnLayout<2, 128, 64>::bytes));
  EXPECT_GT(attn_smem_bytes(2, 128, 64), kSm86);
  EXPECT_GT(attn_smem_bytes(4, 128, 64), kSm86);
  EXPECT_LE(attn_smem_bytes(4, 128, 64), kSm80);
  for (int es : {2, 4})
    for (int dp : {16, 64, 80, 128}) {
      EXPECT_LE(attn_smem_bytes(es, dp, 16), kSm86) << es << " " << dp;
      EXPECT_LE(attn_smem_bytes(es, dp, 64), kSm80) << es << " " << dp;
    }
  EXPECT_EQ(attn_smem_bytes(2, 96, 64), 0u);
  EXPECT_EQ(attn_smem_bytes(3, 128, 64), 0u);
}

TEST(CudaHost, RowTileFollowsTheOptInLimit) {
  EXPECT_EQ(attn_row_tile(16, 2, 128, kSm90), 16);  // small steps: 16 rows everywhere
  EXPECT_EQ(attn_row_tile(17, 2, 128, kSm90), 64);
  EXPECT_EQ(attn_row_tile(17, 2, 128, kSm80), 64);
  EXPECT_EQ(attn_row_tile(17, 2, 128, kSm86), 16);  // would not launch with 64
  EXPECT_EQ(attn_row_tile(256, 4, 128, kSm86), 16);
  EXPECT_EQ(attn_row_tile(256, 2, 64, kSm86), 64);  // D = 64 fits: 64 rows there too
  for (int D : {8, 16, 40, 64, 72, 80, 96, 128})
    for (int es : {2, 4})
      for (size_t lim : {kSm86, kSm80, kSm90}) {
        const int bm = attn_row_tile(64, es, D, lim);
        EXPECT_LE(attn_smem_bytes(es, attn_padded_dim(D), bm), lim) << D << " " << es << " " << lim;
      }
}

TEST(CudaHost, PaddedHeadDims) {
  EXPECT_EQ(attn_padded_dim(0), 0);
  EXPECT_EQ(attn_padded_dim(8), 16);
  EXPECT_EQ(attn_padded_dim(48), 64);
  EXPECT_EQ(attn_padded_dim(72), 80);
  EXPECT_EQ(attn_padded_dim(96), 128);
  EXPECT_EQ(attn_padded_dim(129), 0);
}

TEST(CudaHost, SplitCount) {
  // Splits at fixed absolute key positions: as many as the longest cache plus the step needs, never chosen by T's
  // occupancy or the workspace (batch invariance; tests/simt/test_simt_invariance.cpp checks the bits).
  EXPECT_EQ(attn_splits(4096, 1, 512), 9);
  EXPECT_EQ(attn_splits(100, 1, 512), 1);
  EXPECT_EQ(attn_splits(0, 256, 256), 1);
  EXPECT_EQ(attn_splits(1, 256, 256), 2);
  EXPECT_EQ(attn_splits(4096, 1, 96), 0);  // not a multiple of 64
  // Every split has work at the maximum length, and a model's split size keeps at most 17 splits at its capacity.
  for (int T : {1, 3, 16, 64, 256})
    for (int len : {0, 1, 63, 64, 1000, 4096, 131072}) {
      const int keys = attn_split_keys(len + 256), s = attn_splits(len, T, keys);
      EXPECT_GE(s, 1);
      EXPECT_LE(s, 17) << T << " " << len;
      EXPECT_GT(len + T - (s - 1) * keys, 0) << T << " " << len << ": split " << s - 1 << " is empty";
    }
}

TEST(CudaHost, OneListOfStepBuckets) {
  EXPECT_EQ(la::step_buckets(), (std::vector<int>{1, 8, 16, 32, 64, 128, 256}));
  for (int T = 1; T <= 300; ++T) {
    const int b = la::step_bucket(T);
    if (T > 256) {
      EXPECT_EQ(b, -1);
      continue;
    }
    EXPECT_GE(b, T);
    for (int x : la::step_buckets())
      if (x >= T) {
        EXPECT_EQ(b, x) << T;
        break;
      }
  }
}

TEST(CudaHost, UnsupportedModels) {
  la::ModelConfig c;
  c.heads = 32;
  c.kv_heads = 8;
  c.head_dim = 128;
  EXPECT_EQ(la::cuda_kernels_unsupported_reason(c, 2), "");
  EXPECT_EQ(la::cuda_kernels_unsupported_reason(c, 4), "");
  c.head_dim = 256;
  EXPECT_NE(la::cuda_kernels_unsupported_reason(c, 2).find("head dim 256"), std::string::npos);
  c.head_dim = 60;  // 120 bytes in 16-bit: not a 16-byte multiple; 240 in fp32 is
  EXPECT_NE(la::cuda_kernels_unsupported_reason(c, 2).find("multiple of 8"), std::string::npos);
  EXPECT_EQ(la::cuda_kernels_unsupported_reason(c, 4), "");
  c.head_dim = 64;
  c.kv_heads = 5;
  EXPECT_EQ(la::cuda_kernels_unsupported_reason(c, 2), "heads not a multiple of kv heads");
  c.kv_heads = 0;
  EXPECT_NE(la::cuda_kernels_unsupported_reason(c, 2), "");
}

// The architectures whose features have no CUDA kernel go to the ATen forward, and the reason says which features
// (the presets carry the released configs' features); Mistral-Nemo has none, so the kernels serve it.
TEST(CudaHost, ArchitectureFeaturesRouteToAten) {
  const struct { const char* preset; const char* lacks; } cases[] = {
      {"qwen3-0.6b", "q/k norms"},           {"phi-3-mini", "sliding window"},
      {"gemma-2-2b", "attention soft-capping"}, {"gemma-3-1b", "local RoPE base"},
      {"tiny-phi3", "partial rotary"},       {"tiny-gemma2", "final logit soft-capping"}};
  for (const auto& k : cases)
    for (int es : {2, 4}) {
      const std::string why = la::cuda_kernels_unsupported_reason(la::preset_config(k.preset), es);
      EXPECT_NE(why.find("the CUDA kernels lack"), std::string::npos) << k.preset << ": " << why;
      EXPECT_NE(why.find(k.lacks), std::string::npos) << k.preset << ": " << why;
      EXPECT_NE(why.find("ATen"), std::string::npos) << k.preset << ": " << why;
    }
  EXPECT_EQ(la::cuda_kernels_unsupported_reason(la::preset_config("mistral-nemo"), 2), "");
  EXPECT_EQ(la::cuda_kernels_unsupported_reason(la::preset_config("qwen2-0.5b"), 2), "");
}

}  // namespace
}  // namespace la::kern
