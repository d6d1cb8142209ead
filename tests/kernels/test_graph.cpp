// StepGraphs: a padded step captured once per bucket and replayed with new inputs and cache lengths.
#include <stdexcept>

#include "kernel_test_util.h"
#include "lookahead_kernels.h"

using namespace la_test;
namespace lk = la::kern;

namespace {
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() {
    if (s) cudaStreamDestroy(s);
  }
};
}  // namespace

TEST(StepGraphs, BucketsAndErrors) {
  LA_REQUIRE_CUDA();
  lk::StepGraphs g({32, 1, 16, 16, 0});
  EXPECT_EQ(g.buckets(), (std::vector<int>{1, 16, 32}));
  EXPECT_EQ(g.bucket_for(0), 1);
  EXPECT_EQ(g.bucket_for(1), 1);
  EXPECT_EQ(g.bucket_for(2), 16);
  EXPECT_EQ(g.bucket_for(16), 16);
  EXPECT_EQ(g.bucket_for(17), 32);
  EXPECT_EQ(g.bucket_for(33), -1);
  Stream st;
  EXPECT_FALSE(g.captured(16));
  EXPECT_EQ(g.replay(16, st.s), cudaErrorInvalidValue);
  EXPECT_EQ(g.capture(7, st.s, [](cudaStream_t) {}), cudaErrorInvalidValue);
  // A body that throws: the capture is ended and discarded, the exception propagates, the stream still works.
  EXPECT_THROW(g.capture(16, st.s, [](cudaStream_t) { throw std::runtime_error("boom"); }), std::runtime_error);
  EXPECT_FALSE(g.captured(16));
  const at::Tensor p = to_device_i32({-1, 0, 1});
  const at::Tensor bits = at::zeros({3, 1}, cuda_opts(at::kInt));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(lk::launch_ancestor_bits(p.data_ptr<int32_t>(), 3, reinterpret_cast<uint32_t*>(bits.data_ptr<int32_t>()), st.s),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  EXPECT_EQ(bits.cpu().data_ptr<int32_t>()[2], 7);
}

TEST(StepGraphs, CapturedStepReplaysWithNewInputsAndLengths) {
  LA_REQUIRE_CUDA();
  at::manual_seed(21);
  std::mt19937 rng(21);
  const int B = 16, Hq = 8, Hkv = 2, D = 64, cap = 1024;
  const auto o = cuda_opts(at::kHalf);
  // Static buffers: everything the graph touches lives at fixed addresses.
  const at::Tensor q = at::empty({B, Hq, D}, o), kn = at::empty({B, Hkv, D}, o), vn = at::empty({B, Hkv, D}, o);
  const at::Tensor kc = at::randn({cap, Hkv, D}, o), vc = at::randn({cap, Hkv, D}, o);
  const at::Tensor parents = at::empty({B}, cuda_opts(at::kInt)), tokens = at::zeros({B}, cuda_opts(at::kInt));
  const at::Tensor bits = at::empty({B, lk::ancestor_words(B)}, cuda_opts(at::kInt));
  const at::Tensor len = at::empty({1}, cuda_opts(at::kInt));
  const at::Tensor out = at::empty({B, Hq, D}, o);
  const at::Tensor am = at::empty({B}, cuda_opts(at::kInt)), acc = at::empty({1 + 2 * B}, cuda_opts(at::kInt));

  lk::StepAttentionArgs a;
  a.dtype = lk::DType::F16;
  a.T = B;
  a.Hq = Hq;
  a.Hkv = Hkv;
  a.D = D;
  a.q = q.data_ptr();
  a.q_stride_t = q.stride(0);
  a.q_stride_h = q.stride(1);
  a.k_cache = kc.data_ptr();
  a.kc_stride_t = kc.stride(0);
  a.kc_stride_h = kc.stride(1);
  a.v_cache = vc.data_ptr();
  a.vc_stride_t = vc.stride(0);
  a.vc_stride_h = vc.stride(1);
  a.cache_len_dev = len.data_ptr<int32_t>();
  a.max_cache_len = cap;
  a.k_new = kn.data_ptr();
  a.kn_stride_t = kn.stride(0);
  a.kn_stride_h = kn.stride(1);
  a.v_new = vn.data_ptr();
  a.vn_stride_t = vn.stride(0);
  a.vn_stride_h = vn.stride(1);
  a.anc_bits = reinterpret_cast<const uint32_t*>(bits.data_ptr<int32_t>());
  a.out = out.data_ptr();
  a.o_stride_t = out.stride(0);
  a.o_stride_h = out.stride(1);
  a.scale = 0.125f;
  a.workspace_bytes = size_t(-1);
  const int splits = lk::step_attention_splits(a);
  const at::Tensor ws = at::empty({int64_t(lk::step_attention_workspace_bytes(B, Hq, D, splits)) + 1}, cuda_opts(at::kByte));
  a.workspace = ws.data_ptr();
  a.workspace_bytes = size_t(ws.numel());

  const auto body = [&](cudaStream_t s) {
    lk::launch_ancestor_bits(parents.data_ptr<int32_t>(), B, reinterpret_cast<uint32_t*>(bits.data_ptr<int32_t>()), s);
    lk::launch_step_attention(a, s);
    lk::launch_argmax_rows(lk::DType::F16, B, Hq * D, out.data_ptr(), Hq * D, am.data_ptr<int32_t>(), s);
    lk::launch_greedy_accept(B, parents.data_ptr<int32_t>(), tokens.data_ptr<int32_t>(), nullptr,
                             am.data_ptr<int32_t>(), acc.data_ptr<int32_t>(), s);
  };
  Stream st;
  lk::StepGraphs graphs;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(graphs.capture(graphs.bucket_for(B), st.s, body), cudaSuccess);
  ASSERT_TRUE(graphs.captured(B));

  for (int round = 0; round < 4; ++round) {
    const int T = round == 0 ? B : 1 + round * 4, L = std::vector<int>{0, 5, 700, 1024}[round];
    SCOPED_TRACE("round " + std::to_string(round) + " T=" + std::to_string(T) + " L=" + std::to_string(L));
    std::vector<int32_t> p = random_parents(T, round % 3, rng);
    p.resize(B, -1);  // padding rows
    q.copy_(at::randn({B, Hq, D}, o));
    kn.copy_(at::randn({B, Hkv, D}, o));
    vn.copy_(at::randn({B, Hkv, D}, o));
    parents.copy_(to_device_i32(p));
    len.fill_(L);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(graphs.replay(B, st.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
    const at::Tensor ref = ref_step_attention(q, kc, vc, L, kn, vn, p, 0.125);
    EXPECT_LT(rel_err(out.narrow(0, 0, T), ref.narrow(0, 0, T)), attn_tol(at::kHalf));
    EXPECT_TRUE(at::equal(am.to(at::kLong), out.view({B, Hq * D}).argmax(1)));
    const at::Tensor acc_h = acc.cpu();
    EXPECT_GE(acc_h.data_ptr<int32_t>()[0], 1);
    EXPECT_EQ(acc_h.data_ptr<int32_t>()[1], 0);
  }
}
