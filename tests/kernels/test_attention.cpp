// Step (tree) attention kernel vs an fp32 ATen reference.
#include <cmath>
#include <sstream>

#include "kernel_test_util.h"
#include "cuda_ops.h"
#include "lookahead/util/error.h"
#include "step_attention.h"

using namespace la_test;

namespace {

struct HeadCfg {
  int Hq, Hkv, D;
};
// TinyLlama (GQA 8), Llama-2-7B (MHA), head dims 80 / 8 / 96 (padded to 128) / 16.
const HeadCfg kHeads[] = {{32, 4, 64}, {32, 32, 128}, {8, 8, 80}, {4, 2, 8}, {4, 1, 96}, {2, 2, 16}};
const std::pair<int, int> kTL[] = {{1, 0},    {1, 1},     {1, 4096},  {2, 63},   {3, 64},    {16, 65},
                                   {17, 1000}, {64, 256}, {100, 1024}, {128, 4096}, {256, 0}, {256, 4096}};
const at::ScalarType kTypes[] = {at::kFloat, at::kHalf, at::kBFloat16};

struct Inputs {
  at::Tensor q, kc, vc, kn, vn, parents_d;
  std::vector<int32_t> parents;
};

Inputs make_inputs(int T, int L, HeadCfg h, at::ScalarType dt, int kind, std::mt19937& rng, int extra_cache = 0) {
  const auto o = cuda_opts(dt);
  Inputs in;
  in.q = at::randn({T, h.Hq, h.D}, o);
  if (L + extra_cache > 0) {
    in.kc = at::randn({L + extra_cache, h.Hkv, h.D}, o);
    in.vc = at::randn({L + extra_cache, h.Hkv, h.D}, o);
  }
  in.kn = at::randn({T, h.Hkv, h.D}, o);
  in.vn = at::randn({T, h.Hkv, h.D}, o);
  in.parents = random_parents(T, kind, rng);
  in.parents_d = to_device_i32(in.parents);
  return in;
}

std::string describe(at::ScalarType dt, HeadCfg h, int T, int L, int kind) {
  std::ostringstream os;
  os << name_of(dt) << " Hq=" << h.Hq << " Hkv=" << h.Hkv << " D=" << h.D << " T=" << T << " L=" << L
     << " mask=" << (kind == 0 ? "chain" : kind == 1 ? "tree" : "forest");
  return os.str();
}

}  // namespace

TEST(StepAttention, MatchesReferenceAcrossShapesMasksAndDtypes) {
  LA_REQUIRE_CUDA();
  std::mt19937 rng(1);
  at::manual_seed(1);
  int n = 0;
  for (at::ScalarType dt : kTypes) {
    for (const HeadCfg& h : kHeads) {
      for (auto [T, L] : kTL) {
        const int kind = n++ % 3;
        SCOPED_TRACE(describe(dt, h, T, L, kind));
        const Inputs in = make_inputs(T, L, h, dt, kind, rng);
        const double scale = 1.0 / std::sqrt(double(h.D));
        const at::Tensor out = la::cuda::step_attention(in.q, in.kc, in.vc, L, in.kn, in.vn, in.parents_d, scale);
        const at::Tensor ref = ref_step_attention(in.q, in.kc, in.vc, L, in.kn, in.vn, in.parents, scale);
        ASSERT_EQ(out.sizes(), ref.sizes());
        EXPECT_EQ(out.scalar_type(), dt);
        EXPECT_LT(rel_err(out, ref), attn_tol(dt));
      }
    }
  }
}

TEST(StepAttention, ForcedSplitCountsAgree) {
  LA_REQUIRE_CUDA();
  std::mt19937 rng(2);
  at::manual_seed(2);
  for (at::ScalarType dt : kTypes) {
    const HeadCfg h{8, 2, 64};
    const int T = 5, L = 3000;
    const Inputs in = make_inputs(T, L, h, dt, 1, rng);
    const double scale = 0.125;
    const at::Tensor ref = ref_step_attention(in.q, in.kc, in.vc, L, in.kn, in.vn, in.parents, scale);
    const at::Tensor bits = la::cuda::ancestor_bits(in.parents_d);
    for (int s : {64, 128, 192, 512, 3072}) {  // 47, 24, 16, 6 and 1 splits
      SCOPED_TRACE(std::string(name_of(dt)) + " split_keys=" + std::to_string(s));
      la::cuda::AttentionOptions opt;
      opt.split_keys = s;
      const at::Tensor out = la::cuda::step_attention_bits(in.q, in.kc, in.vc, L, in.kn, in.vn, bits, scale, opt);
      EXPECT_LT(rel_err(out, ref), attn_tol(dt));
    }
  }
}

// The split count is never reduced for a small workspace (that would move split boundaries): it is an error.
TEST(StepAttention, SmallWorkspaceIsAnError) {
  LA_REQUIRE_CUDA();
  std::mt19937 rng(3);
  at::manual_seed(3);
  const HeadCfg h{32, 32, 128};
  const int T = 1, L = 4000;
  const Inputs in = make_inputs(T, L, h, at::kHalf, 0, rng);
  const at::Tensor ref = ref_step_attention(in.q, in.kc, in.vc, L, in.kn, in.vn, in.parents, 0.088);
  const at::Tensor bits = la::cuda::ancestor_bits(in.parents_d);
  const int64_t need = int64_t(la::kern::step_attention_workspace_bytes(T, h.Hq, h.D, 8));  // 4001 keys / 512
  for (int64_t bytes : {int64_t(0), int64_t(64), need - 1, need}) {
    SCOPED_TRACE("workspace bytes " + std::to_string(bytes));
    const at::Tensor ws = at::empty({std::max<int64_t>(bytes, 1)}, cuda_opts(at::kByte));
    const at::Tensor ws_view = ws.narrow(0, 0, bytes);
    la::cuda::AttentionOptions opt;
    opt.workspace = &ws_view;
    if (bytes < need) {
      EXPECT_THROW(la::cuda::step_attention_bits(in.q, in.kc, in.vc, L, in.kn, in.vn, bits, 0.088, opt), std::exception);
      continue;
    }
    const at::Tensor out = la::cuda::step_attention_bits(in.q, in.kc, in.vc, L, in.kn, in.vn, bits, 0.088, opt);
    EXPECT_LT(rel_err(out, ref), attn_tol(at::kHalf));
  }
}

TEST(StepAttention, DeviceCacheLengthForGraphReplay) {
  LA_REQUIRE_CUDA();
  std::mt19937 rng(4);
  at::manual_seed(4);
  const HeadCfg h{32, 4, 64};
  const int T = 24, cap = 2048;
  const Inputs in = make_inputs(T, 0, h, at::kBFloat16, 1, rng, cap);
  const at::Tensor bits = la::cuda::ancestor_bits(in.parents_d);
  for (int L : {0, 1, 777, 2048}) {
    SCOPED_TRACE("device cache_len " + std::to_string(L));
    const at::Tensor len = to_device_i32({L});
    la::cuda::AttentionOptions opt;
    opt.cache_len_dev = &len;
    opt.max_cache_len = cap;
    const at::Tensor out = la::cuda::step_attention_bits(in.q, in.kc, in.vc, 12345, in.kn, in.vn, bits, 0.125, opt);
    const at::Tensor ref = ref_step_attention(in.q, in.kc, in.vc, L, in.kn, in.vn, in.parents, 0.125);
    EXPECT_LT(rel_err(out, ref), attn_tol(at::kBFloat16));
  }
}

TEST(StepAttention, StridedViewsOfFusedBuffers) {
  LA_REQUIRE_CUDA();
  std::mt19937 rng(5);
  at::manual_seed(5);
  for (at::ScalarType dt : kTypes) {
    SCOPED_TRACE(name_of(dt));
    const int T = 40, L = 500, cap = 640, Hq = 16, Hkv = 4, D = 64;
    const auto o = cuda_opts(dt);
    const at::Tensor qkv = at::randn({T, (Hq + 2 * Hkv) * D}, o);  // a fused projection output
    const at::Tensor q = qkv.narrow(1, 0, Hq * D).view({T, Hq, D});
    const at::Tensor kn = qkv.narrow(1, Hq * D, Hkv * D).view({T, Hkv, D});
    const at::Tensor vn = qkv.narrow(1, (Hq + Hkv) * D, Hkv * D).view({T, Hkv, D});
    const at::Tensor cache = at::randn({cap, 2, Hkv, D}, o);  // fused K/V cache
    const at::Tensor kc = cache.select(1, 0), vc = cache.select(1, 1);
    const at::Tensor out_buf = at::zeros({T, Hq, 2 * D}, o);
    const at::Tensor out_view = out_buf.narrow(2, 0, D);
    const std::vector<int32_t> parents = random_parents(T, 2, rng);
    la::cuda::AttentionOptions opt;
    opt.out = &out_view;
    const at::Tensor out = la::cuda::step_attention_bits(q, kc, vc, L, kn, vn,
                                                         la::cuda::ancestor_bits(to_device_i32(parents)), 0.125, opt);
    EXPECT_EQ(out.data_ptr(), out_view.data_ptr());
    const at::Tensor ref = ref_step_attention(q, kc, vc, L, kn, vn, parents, 0.125);
    EXPECT_LT(rel_err(out_view, ref), attn_tol(dt));
    EXPECT_EQ(out_buf.narrow(2, D, D).abs().max().item<double>(), 0.0);  // untouched
  }
}

TEST(StepAttention, PaddingRowsDoNotChangeRealRows) {
  LA_REQUIRE_CUDA();
  std::mt19937 rng(6);
  at::manual_seed(6);
  const HeadCfg h{32, 4, 64};
  const int T = 10, Tpad = 16, L = 300;
  for (at::ScalarType dt : kTypes) {
    SCOPED_TRACE(name_of(dt));
    const Inputs in = make_inputs(Tpad, L, h, dt, 1, rng);
    std::vector<int32_t> padded = in.parents;
    for (int i = T; i < Tpad; ++i) padded[i] = -1;
    const at::Tensor full = la::cuda::step_attention(in.q, in.kc, in.vc, L, in.kn, in.vn, to_device_i32(padded), 0.125);
    const std::vector<int32_t> real(in.parents.begin(), in.parents.begin() + T);
    const at::Tensor part = la::cuda::step_attention(in.q.narrow(0, 0, T), in.kc, in.vc, L, in.kn.narrow(0, 0, T),
                                                     in.vn.narrow(0, 0, T), to_device_i32(real), 0.125);
    EXPECT_LT(rel_err(full.narrow(0, 0, T), part), attn_tol(dt));
  }
}

TEST(StepAttention, AncestorBitsMatchHost) {
  LA_REQUIRE_CUDA();
  std::mt19937 rng(7);
  for (int T : {1, 2, 31, 32, 33, 64, 255, 256, 300}) {
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("T=" + std::to_string(T) + " kind=" + std::to_string(kind));
      std::vector<int32_t> p = random_parents(T, kind, rng);
      if (T > 3) p[T - 1] = T + 5;  // invalid parent: treated as a root
      const at::Tensor bits = la::cuda::ancestor_bits(to_device_i32(p)).cpu();
      const int W = la::kern::ancestor_words(T);
      ASSERT_EQ(bits.size(0), T);
      ASSERT_EQ(bits.size(1), W);
      const auto anc = host_ancestors(p);
      const int32_t* b = bits.data_ptr<int32_t>();
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          const bool bit = (uint32_t(b[i * W + (j >> 5)]) >> (j & 31)) & 1u;
          const bool want = anc[i][j] && !(i == T - 1 && T > 3 && j != i);
          ASSERT_EQ(bit, want) << "row " << i << " col " << j;
        }
      for (int i = 0; i < T; ++i)  // bits beyond T stay clear
        for (int j = T; j < W * 32; ++j) ASSERT_FALSE((uint32_t(b[i * W + (j >> 5)]) >> (j & 31)) & 1u);
    }
  }
}

TEST(StepAttention, RejectsBadArguments) {
  LA_REQUIRE_CUDA();
  la::kern::StepAttentionArgs a;
  a.T = 1;
  a.Hq = 4;
  a.Hkv = 4;
  a.D = 136;  // > 128
  EXPECT_EQ(la::kern::launch_step_attention(a, nullptr), cudaErrorInvalidValue);
  a.D = 64;
  a.Hkv = 3;  // Hq not a multiple
  EXPECT_EQ(la::kern::launch_step_attention(a, nullptr), cudaErrorInvalidValue);
  const auto o = cuda_opts(at::kHalf);
  const at::Tensor q = at::randn({2, 6, 64}, o), kv = at::randn({2, 4, 64}, o);
  EXPECT_THROW(la::cuda::step_attention(q, at::Tensor(), at::Tensor(), 0, kv, kv, to_device_i32({-1, 0}), 1.0),
               la::Error);
  const at::Tensor q12 = at::randn({2, 4, 12}, o), kv12 = at::randn({2, 4, 12}, o);  // D not a multiple of 8
  EXPECT_THROW(la::cuda::step_attention(q12, at::Tensor(), at::Tensor(), 0, kv12, kv12, to_device_i32({-1, 0}), 1.0),
               la::Error);
}
