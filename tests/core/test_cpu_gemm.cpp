// The CPU skinny GEMM against a double-precision reference, its row ranges, and its batch invariance (a token's
// result must not depend on the other tokens of the step).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "lookahead/model/cpu_gemm.h"

namespace la {
namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

TEST(CpuGemm, MatchesADoubleReferenceOnEveryShapeClass) {
  if (!cpu_gemm_supported()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  std::mt19937 rng(7);
  int checked = 0;
  for (int M : {1, 2, 3, 4, 5, 6, 7, 8, 13, 31, 32})
    for (int K : {1, 3, 8, 9, 64, 172})
      for (int N : {1, 3, 4, 5, 13, 192}) {
        const auto x = random_floats(size_t(M) * K, rng), w = random_floats(size_t(N) * K, rng);
        std::vector<float> y(size_t(M) * N, std::numeric_limits<float>::quiet_NaN());
        cpu_gemm_rows(x.data(), M, K, w.data(), 0, N, y.data(), N);
        for (int t = 0; t < M; ++t)
          for (int n = 0; n < N; ++n) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; ++k) {
              ref += double(x[size_t(t) * K + k]) * w[size_t(n) * K + k];
              mag += std::fabs(double(x[size_t(t) * K + k]) * w[size_t(n) * K + k]);
            }
            ASSERT_NEAR(y[size_t(t) * N + n], ref, 1e-6 * mag + 1e-7) << "M " << M << " K " << K << " N " << N
                                                                        << " t " << t << " n " << n;
            ++checked;
          }
      }
  EXPECT_GT(checked, 10000);
}

TEST(CpuGemm, WritesOnlyTheRequestedWeightRows) {
  if (!cpu_gemm_supported()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  std::mt19937 rng(11);
  const int M = 5, K = 20, N = 23, ldy = 30;
  const auto x = random_floats(size_t(M) * K, rng), w = random_floats(size_t(N) * K, rng);
  std::vector<float> full(size_t(M) * ldy, -7.f), part(size_t(M) * ldy, -7.f);
  cpu_gemm_rows(x.data(), M, K, w.data(), 0, N, full.data(), ldy);
  cpu_gemm_rows(x.data(), M, K, w.data(), 6, 17, part.data(), ldy);
  for (int t = 0; t < M; ++t)
    for (int n = 0; n < ldy; ++n) {
      const float got = part[size_t(t) * ldy + n];
      if (n >= 6 && n < 17)
        EXPECT_EQ(got, full[size_t(t) * ldy + n]) << t << "," << n;
      else
        EXPECT_EQ(got, -7.f) << "row " << n << " outside [6, 17) was written";
    }
}

TEST(CpuGemm, ATokensResultDoesNotDependOnTheOtherTokens) {
  if (!cpu_gemm_supported()) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  std::mt19937 rng(3);
  for (int K : {9, 64, 576}) {
    const int N = 37, M = 32;
    const auto x = random_floats(size_t(M) * K, rng), w = random_floats(size_t(N) * K, rng);
    std::vector<float> all(size_t(M) * N);
    cpu_gemm_rows(x.data(), M, K, w.data(), 0, N, all.data(), N);
    for (int t = 0; t < M; ++t) {
      std::vector<float> one(N);
      cpu_gemm_rows(x.data() + size_t(t) * K, 1, K, w.data(), 0, N, one.data(), N);
      ASSERT_EQ(0, std::memcmp(one.data(), all.data() + size_t(t) * N, N * sizeof(float)))
          << "token " << t << " of 32 differs from the same token alone (K " << K << ")";
    }
  }
}

TEST(CpuGemm, PaysForFewRowsOrWeightsLargerThanL2) {
  EXPECT_TRUE(cpu_gemm_pays(1, 192, 64));
  EXPECT_TRUE(cpu_gemm_pays(8, 192, 64));
  EXPECT_FALSE(cpu_gemm_pays(16, 192, 64));      // 48 KB weight: MKL's blocked kernel is faster
  EXPECT_TRUE(cpu_gemm_pays(16, 1536, 576));     // 3.4 MB weight: streaming it once wins
  EXPECT_TRUE(cpu_gemm_pays(kCpuGemmMaxRows, 49152, 576));
  EXPECT_FALSE(cpu_gemm_pays(kCpuGemmMaxRows + 1, 49152, 576));
}

}  // namespace
}  // namespace la
