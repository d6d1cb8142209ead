// Fused element-wise kernels and the row argmax vs ATen / host references.
#include <cmath>
#include <sstream>

#include "kernel_test_util.h"
#include "cuda_ops.h"
#include "ops.h"
#include "verify.h"

using namespace la_test;

namespace {
const at::ScalarType kTypes[] = {at::kFloat, at::kHalf, at::kBFloat16};

// HF LlamaRMSNorm on a (pre-added) hidden state.
at::Tensor ref_rms_norm(const at::Tensor& h, const at::Tensor& w, double eps) {
  const at::Tensor hf = h.to(at::kFloat);
  const at::Tensor y = hf * at::rsqrt(hf.pow(2).mean({-1}, true) + eps);
  return w * y.to(h.scalar_type());
}

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// HF apply_rotary_pos_emb on x [T, H, D].
at::Tensor ref_rope(const at::Tensor& x, const at::Tensor& pos, const at::Tensor& inv_freq, double s) {
  const at::Tensor freqs = pos.to(at::kFloat).unsqueeze(1) * inv_freq.unsqueeze(0);  // [T, D/2]
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  const at::Tensor cos = (emb.cos() * s).to(x.scalar_type()).unsqueeze(1);
  const at::Tensor sin = (emb.sin() * s).to(x.scalar_type()).unsqueeze(1);
  return x * cos + rotate_half(x) * sin;
}
}  // namespace

TEST(RmsNorm, MatchesHfReference) {
  LA_REQUIRE_CUDA();
  at::manual_seed(11);
  for (at::ScalarType dt : kTypes)
    for (int rows : {1, 7, 256})
      for (int H : {8, 100, 2048, 4096, 5120}) {
        SCOPED_TRACE(std::string(name_of(dt)) + " rows=" + std::to_string(rows) + " H=" + std::to_string(H));
        const auto o = cuda_opts(dt);
        const at::Tensor x = at::randn({rows, H}, o) * 3, w = at::rand({H}, o) + 0.5;
        const at::Tensor out = la::cuda::rms_norm(x, w, 1e-5);
        EXPECT_LT(rel_err(out, ref_rms_norm(x, w, 1e-5)), ew_tol(dt));
        // fused residual add, in place on the residual stream
        const at::Tensor r = at::randn({rows, H}, o);
        const at::Tensor h_ref = x + r;
        const at::Tensor r2 = r.clone();
        const at::Tensor out2 = la::cuda::add_rms_norm_(x, r2, w, 1e-6);
        EXPECT_TRUE(at::equal(r2, h_ref));
        EXPECT_LT(rel_err(out2, ref_rms_norm(h_ref, w, 1e-6)), ew_tol(dt));
      }
}

TEST(RmsNorm, StridedRowsAndLeadingDims) {
  LA_REQUIRE_CUDA();
  at::manual_seed(12);
  const auto o = cuda_opts(at::kHalf);
  const at::Tensor big = at::randn({6, 3000}, o);
  const at::Tensor x = big.narrow(1, 7, 2048);  // misaligned, strided rows: scalar path
  const at::Tensor w = at::rand({2048}, o);
  EXPECT_LT(rel_err(la::cuda::rms_norm(x, w, 1e-5), ref_rms_norm(x, w, 1e-5)), ew_tol(at::kHalf));
  const at::Tensor x3 = at::randn({2, 3, 512}, o), w3 = at::rand({512}, o);
  const at::Tensor out3 = la::cuda::rms_norm(x3, w3, 1e-5);
  EXPECT_EQ(out3.sizes(), x3.sizes());
  EXPECT_LT(rel_err(out3, ref_rms_norm(x3, w3, 1e-5)), ew_tol(at::kHalf));
}

TEST(Rope, MatchesHfReferenceOnFusedQkvViews) {
  LA_REQUIRE_CUDA();
  at::manual_seed(13);
  for (at::ScalarType dt : kTypes)
    for (int D : {8, 64, 80, 128})
      for (int T : {1, 17, 256}) {
        SCOPED_TRACE(std::string(name_of(dt)) + " D=" + std::to_string(D) + " T=" + std::to_string(T));
        const int Hq = 8, Hk = 2;
        const auto o = cuda_opts(dt);
        const at::Tensor qkv = at::randn({T, (Hq + 2 * Hk) * D}, o);
        const at::Tensor q = qkv.narrow(1, 0, Hq * D).view({T, Hq, D});
        const at::Tensor k = qkv.narrow(1, Hq * D, Hk * D).view({T, Hk, D});
        const at::Tensor v = qkv.narrow(1, (Hq + Hk) * D, Hk * D).view({T, Hk, D});
        const at::Tensor pos = at::randint(0, 8192, {T}, cuda_opts(at::kInt));
        // Llama-like frequencies with a random per-frequency scale (stands for Llama-3 scaling).
        const at::Tensor idx = at::arange(0, D / 2, cuda_opts(at::kFloat));
        const at::Tensor inv_freq = at::pow(500000.0, -2.0 * idx / D) * (at::rand({D / 2}, cuda_opts(at::kFloat)) + 0.5);
        const at::Tensor q_ref = ref_rope(q, pos, inv_freq, 1.0), k_ref = ref_rope(k, pos, inv_freq, 1.0);
        const at::Tensor v_before = v.clone();
        la::cuda::rope_(q, k, pos, inv_freq);
        EXPECT_LT(rel_err(q, q_ref), ew_tol(dt));
        EXPECT_LT(rel_err(k, k_ref), ew_tol(dt));
        EXPECT_TRUE(at::equal(v, v_before));
        // single tensor, attention scaling, int64 positions
        const at::Tensor x = at::randn({T, 3, D}, o);
        const at::Tensor x_ref = ref_rope(x, pos, inv_freq, 0.7);
        la::cuda::rope_(x, pos.to(at::kLong), inv_freq, 0.7);
        EXPECT_LT(rel_err(x, x_ref), ew_tol(dt));
      }
}

TEST(SwiGlu, FusedAndSeparateInputs) {
  LA_REQUIRE_CUDA();
  at::manual_seed(14);
  for (at::ScalarType dt : kTypes)
    for (int T : {1, 33, 256})
      for (int I : {8, 100, 5632, 11008}) {
        SCOPED_TRACE(std::string(name_of(dt)) + " T=" + std::to_string(T) + " I=" + std::to_string(I));
        const auto o = cuda_opts(dt);
        const at::Tensor x = at::randn({T, 2 * I}, o) * 2;
        const at::Tensor g = x.narrow(1, 0, I), u = x.narrow(1, I, I);
        const at::Tensor ref = at::silu(g) * u;
        EXPECT_LT(rel_err(la::cuda::swiglu(x), ref), ew_tol(dt));
        EXPECT_LT(rel_err(la::cuda::swiglu(g.contiguous(), u.contiguous()), ref), ew_tol(dt));
        EXPECT_LT(rel_err(la::cuda::swiglu(g, u), ref), ew_tol(dt));
      }
}

TEST(ArgmaxRows, MatchesTorchArgmaxIncludingTies) {
  LA_REQUIRE_CUDA();
  at::manual_seed(15);
  for (at::ScalarType dt : kTypes)
    for (int rows : {1, 16, 256})
      for (int V : {1, 7, 100, 32000, 128256}) {
        SCOPED_TRACE(std::string(name_of(dt)) + " rows=" + std::to_string(rows) + " V=" + std::to_string(V));
        const auto o = cuda_opts(dt);
        at::Tensor l = at::randn({rows, V}, o);
        if (V > 10) {  // exact ties with the row max at several places
          const at::Tensor mx = std::get<0>(l.max(1, true));
          l.narrow(1, V / 3, 1).copy_(mx);
          l.narrow(1, V - 1, 1).copy_(mx);
        }
        if (rows > 1) l[rows - 1].fill_(1.0);  // all equal: index 0
        const at::Tensor got = la::cuda::argmax_rows(l);
        EXPECT_TRUE(at::equal(got.to(at::kLong), l.argmax(1))) << got.cpu() << l.argmax(1).cpu();
        // quantised logits (many ties) through a strided view
        const at::Tensor lw = at::randint(0, 5, {rows, V + 3}, o).narrow(1, 3, V);
        EXPECT_TRUE(at::equal(la::cuda::argmax_rows(lw).to(at::kLong), lw.argmax(1)));
      }
  const at::Tensor one = at::randn({1000}, cuda_opts(at::kFloat));
  EXPECT_EQ(la::cuda::argmax_rows(one).item<int32_t>(), one.argmax().item<int64_t>());
}
