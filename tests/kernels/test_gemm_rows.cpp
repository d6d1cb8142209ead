// The fixed-configuration GEMM (src/backend/cuda/kernels/gemm_rows.h) on a real GPU (skipped without one): against a double ATen
// reference on decode shapes, and bit-exact batch invariance of each row across M = 1..256 on the hardware's own
// tensor cores and FMAs (the SIMT tests, tests/simt/test_simt_gemm.cpp, cannot model the tensor cores' summation
// order). GemmRows.TimingVsCublas prints times next to cuBLAS (at::linear) and cuBLAS's own invariance across M,
// asserting nothing about them: no GPU was available when this was written, so these are the numbers to collect.
#include <cstdio>

#include "gemm_rows.h"
#include "kernel_test_util.h"

using namespace la_test;
namespace lk = la::kern;

namespace {

lk::DType kdt(at::ScalarType t) {
  return t == at::kFloat ? lk::DType::F32 : t == at::kHalf ? lk::DType::F16 : lk::DType::BF16;
}

// y[:M] = x[:M] w^T (+ b) through launch_linear_fixed (y preallocated [M, N], contiguous).
void linear_fixed(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor& y, int M) {
  lk::LinearArgs a{};
  a.dt = kdt(x.scalar_type());
  a.M = M;
  a.N = int(w.size(0));
  a.K = int(w.size(1));
  a.x = x.data_ptr();
  a.ldx = x.stride(0);
  a.w = w.data_ptr();
  a.ldw = w.stride(0);
  a.bias = b ? b->data_ptr() : nullptr;
  a.y = y.data_ptr();
  a.ldy = y.stride(0);
  ASSERT_EQ(lk::launch_linear_fixed(a, nullptr), cudaSuccess);
}

at::Tensor run(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, int M) {
  at::Tensor y = at::empty({M, w.size(0)}, x.options());
  linear_fixed(x, w, b, y, M);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return y;
}

}  // namespace

TEST(GemmRows, MatchesDoubleReferenceOnDecodeShapes) {
  LA_REQUIRE_CUDA();
  at::manual_seed(1);
  struct Shape {
    int M, N, K;
  };
  // SmolLM2-135M's projections and a tail-heavy shape (N, K not multiples of the tiles; K odd: scalar path).
  for (const Shape s : {Shape{1, 576, 576}, Shape{16, 1536, 576}, Shape{64, 576, 1536}, Shape{256, 192, 576},
                        Shape{37, 100, 77}}) {
    for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
      for (bool bias : {false, true}) {
        SCOPED_TRACE(testing::Message() << name_of(dt) << " M=" << s.M << " N=" << s.N << " K=" << s.K
                                        << " bias=" << bias);
        const at::Tensor x = at::randn({s.M, s.K}, cuda_opts(dt)), w = at::randn({s.N, s.K}, cuda_opts(dt));
        const at::Tensor b = at::randn({s.N}, cuda_opts(dt));
        const at::Tensor y = run(x, w, bias ? &b : nullptr, s.M);
        at::Tensor ref = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t());
        if (bias) ref = ref + b.to(at::kDouble);
        // fp32: summation error of K terms of |x w| ~ 1 (relative to sqrt(K)-sized outputs); 16-bit: one rounding.
        const double tol = dt == at::kFloat ? 1e-5 : dt == at::kHalf ? 2e-3 : 1.6e-2;
        EXPECT_LT(rel_err(y, ref, 1.0), tol);
      }
    }
  }
}

TEST(GemmRows, RowIsTheSameBitsAtEveryStepSize) {
  LA_REQUIRE_CUDA();
  at::manual_seed(2);
  const int N = 200, K = 320;
  for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(name_of(dt));
    const at::Tensor x = at::randn({256, K}, cuda_opts(dt)), w = at::randn({N, K}, cuda_opts(dt));
    const at::Tensor b = at::randn({N}, cuda_opts(dt));
    const at::Tensor full = run(x, w, &b, 256);
    for (int M : {1, 2, 15, 16, 17, 64, 255}) {
      EXPECT_TRUE(at::equal(run(x, w, &b, M), full.narrow(0, 0, M))) << "rows of M=" << M << " vs M=256";
    }
    // Each row at another position among other rows: the rows reversed and rolled.
    const at::Tensor perm = at::arange(255, -1, -1, cuda_opts(at::kLong)).roll(37);
    const at::Tensor xp = x.index_select(0, perm).contiguous();
    EXPECT_TRUE(at::equal(run(xp, w, &b, 256), full.index_select(0, perm))) << "permuted rows";
    // A single row alone vs inside the step.
    for (int r : {0, 17, 100, 255}) {
      const at::Tensor xr = x.narrow(0, r, 1).contiguous();
      EXPECT_TRUE(at::equal(run(xr, w, &b, 1), full.narrow(0, r, 1))) << "row " << r << " alone";
    }
  }
}

TEST(GemmRows, TimingVsCublas) {
  LA_REQUIRE_CUDA();
  at::manual_seed(3);
  struct Shape {
    int N, K;
  };
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  for (const Shape s : {Shape{1536, 576}, Shape{576, 1536}, Shape{4096, 4096}, Shape{14336, 4096}}) {
    for (auto dt : {at::kFloat, at::kBFloat16}) {
      const at::Tensor w = at::randn({s.N, s.K}, cuda_opts(dt));
      const at::Tensor x = at::randn({256, s.K}, cuda_opts(dt));
      const at::Tensor full = at::linear(x, w);
      int cublas_rows_differ = 0;
      for (int M : {1, 16, 64, 256}) {
        const at::Tensor xm = x.narrow(0, 0, M);
        at::Tensor y = at::empty({M, s.N}, x.options());
        auto time = [&](auto&& f) {
          for (int i = 0; i < 3; ++i) f();
          cudaEventRecord(e0, nullptr);
          const int iters = 20;
          for (int i = 0; i < iters; ++i) f();
          cudaEventRecord(e1, nullptr);
          cudaEventSynchronize(e1);
          float ms = 0;
          cudaEventElapsedTime(&ms, e0, e1);
          return 1000.0 * ms / iters;
        };
        const double us_fixed = time([&] { linear_fixed(xm, w, nullptr, y, M); });
        const double us_cublas = time([&] { (void)at::linear(xm, w); });
        const at::Tensor yc = at::linear(xm, w);
        cublas_rows_differ += int(at::ne(yc, full.narrow(0, 0, M)).any(1).sum().item<int64_t>());
        const double gbs = double(s.N) * s.K * w.element_size() / (us_fixed * 1e3);
        std::printf("gemm_rows %s M=%3d N=%5d K=%5d: fixed %8.1f us (%6.0f GB/s of weights), cuBLAS %8.1f us\n",
                    name_of(dt), M, s.N, s.K, us_fixed, gbs, us_cublas);
      }
      std::printf("gemm_rows %s N=%d K=%d: cuBLAS rows differing from the M=256 result at M = 1/16/64: %d\n",
                  name_of(dt), s.N, s.K, cublas_rows_differ);
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}
