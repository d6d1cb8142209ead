// The fixed-configuration GEMM of a step's rows (src/backend/cuda/kernels/gemm_rows.cu: the very source nvcc compiles) under the
// SIMT emulation (simt.h): against a double-precision host reference (bias and none, N and K tails, row pitches
// larger than the rows, the unaligned scalar load path), its argument checks, and bit-exact batch invariance: a
// row's output is the same bits at M = 1, 2, 15, 16, 17, 64, 255, 256, at any position in the step, whatever the
// other rows hold, and through either load path, in fp32, fp16 and bf16. Small shapes: the emulation is slow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <type_traits>
#include <utility>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "gemm_rows.h"
#include "simt.h"
#include "simt_elems.h"

namespace lk = la::kern;

namespace {

using namespace simt_elems;

void no_emulation_errors() {
  for (const auto& e : la_simt::take_errors()) ADD_FAILURE() << "emulation: " << e;
}

template <class E>
std::vector<E> random_vec(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<E> v(n);
  for (auto& x : v) x = from_f<E>(u(rng));
  return v;
}

// Values of widely spread magnitudes (u * 2^e, e uniform in [lo, hi]): products of 16-bit inputs are exact in
// fp32, and with values of one magnitude their short sums would be exact too, so that any summation order gave the
// same bits and the invariance tests could not tell orders apart. Spread magnitudes make the sums round.
template <class E>
std::vector<E> spread_vec(size_t n, std::mt19937& rng, int lo, int hi) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> e(lo, hi);
  std::vector<E> v(n);
  for (auto& x : v) x = from_f<E>(std::ldexp(u(rng), e(rng)));
  return v;
}

// y (M rows of pitch ldy, pre-filled with a sentinel so that stray writes show) from the kernel.
template <class E>
std::vector<E> run_gemm(int M, int N, int K, const E* x, int64_t ldx, const E* w, int64_t ldw, const E* bias,
                        int64_t ldy) {
  std::vector<E> y(size_t(M) * ldy, from_f<E>(12345.f));
  lk::LinearArgs a{};
  a.dt = dtype_of<E>();
  a.M = M;
  a.N = N;
  a.K = K;
  a.x = x;
  a.ldx = ldx;
  a.w = w;
  a.ldw = ldw;
  a.bias = bias;
  a.y = y.data();
  a.ldy = ldy;
  EXPECT_EQ(lk::launch_linear_fixed(a, nullptr), cudaSuccess);
  no_emulation_errors();
  return y;
}

// Relative error of the stored result's rounding (half an ulp is 2^-24 / 2^-11 / 2^-8; one ulp allowed).
template <class E>
double out_rel() { return sizeof(E) == 4 ? 0.0 : std::is_same_v<E, __half> ? 1.0 / 1024 : 1.0 / 128; }

// y vs the double reference. Tolerance per element: K * 2^-23 * (sum_k |x w| + |b|) (fp32 sequential summation
// bound, doubled) plus one ulp of the stored type of |y|.
template <class E>
void reference_case(int M, int N, int K, int64_t ldx, int64_t ldw, int64_t ldy, bool bias, int x_offset,
                    uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "M=" << M << " N=" << N << " K=" << K << " ldx=" << ldx << " ldw=" << ldw
                                  << " ldy=" << ldy << " bias=" << bias << " x_offset=" << x_offset);
  std::mt19937 rng(seed);
  const auto xs = random_vec<E>(size_t(M) * ldx + x_offset, rng);
  const auto w = random_vec<E>(size_t(N) * ldw, rng);
  const auto b = random_vec<E>(N, rng);
  const E* x = xs.data() + x_offset;
  const auto y = run_gemm<E>(M, N, K, x, ldx, w.data(), ldw, bias ? b.data() : nullptr, ldy);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double s = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = double(to_f(x[int64_t(m) * ldx + k])) * to_f(w[int64_t(n) * ldw + k]);
        s += p;
        mag += std::fabs(p);
      }
      if (bias) {
        s += to_f(b[n]);
        mag += std::fabs(to_f(b[n]));
      }
      const double tol = K * std::ldexp(1.0, -23) * mag + out_rel<E>() * std::fabs(s);
      ASSERT_NEAR(to_f(y[int64_t(m) * ldy + n]), s, tol) << "y[" << m << "][" << n << "]";
    }
    for (int64_t n = N; n < ldy; ++n)  // the row padding is not written
      ASSERT_EQ(to_f(y[int64_t(m) * ldy + n]), to_f(from_f<E>(12345.f))) << "padding y[" << m << "][" << n << "]";
  }
}

template <class E>
void reference_cases() {
  // N tail (70 = 64 + 6) and K tail (40: 32 + 8 in fp32, one partial tile in 16-bit), with bias; the vector
  // (cp.async) path.
  reference_case<E>(5, 70, 40, 40, 40, 70, true, 0, 1);
  // Two row tiles (the second partial: 33 = 32 + 1), 4 (16-bit) or 7 (fp32) k tiles so that every pipeline stage
  // is reused, pitches larger than the rows, no bias.
  reference_case<E>(33, 64, 200, 208, 216, 67, false, 0, 2);
  // K shorter than one stage and not a multiple of the 16-byte vector (a copy crossing K), one full row fragment.
  reference_case<E>(16, 17, 22, 24, 24, 17, true, 0, 3);
  // The scalar path: x one element off 16-byte alignment and odd pitches (K = 37 ends inside a vector).
  reference_case<E>(17, 65, 37, 41, 39, 66, true, 1, 4);
}

TEST(SimtGemm, Fp32MatchesDoubleReference) { reference_cases<float>(); }
TEST(SimtGemm, Fp16MatchesDoubleReference) { reference_cases<__half>(); }
TEST(SimtGemm, Bf16MatchesDoubleReference) { reference_cases<__nv_bfloat16>(); }

TEST(SimtGemm, BadArgumentsAreInvalidValue) {
  std::vector<float> x(64), w(64), y(64);
  lk::LinearArgs ok{};
  ok.M = 2;
  ok.N = 2;
  ok.K = 4;
  ok.x = x.data();
  ok.ldx = 4;
  ok.w = w.data();
  ok.ldw = 4;
  ok.y = y.data();
  ok.ldy = 2;
  EXPECT_EQ(lk::launch_linear_fixed(ok, nullptr), cudaSuccess);
  auto bad = [&](auto mutate) {
    lk::LinearArgs a = ok;
    mutate(a);
    return lk::launch_linear_fixed(a, nullptr);
  };
  EXPECT_EQ(bad([](lk::LinearArgs& a) { a.M = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](lk::LinearArgs& a) { a.N = -1; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](lk::LinearArgs& a) { a.K = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](lk::LinearArgs& a) { a.x = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](lk::LinearArgs& a) { a.w = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](lk::LinearArgs& a) { a.y = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](lk::LinearArgs& a) { a.ldx = 3; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](lk::LinearArgs& a) { a.ldw = 3; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](lk::LinearArgs& a) { a.ldy = 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](lk::LinearArgs& a) { a.dt = lk::DType(7); }), cudaErrorInvalidValue);
  // A pointer not aligned to its element type.
  EXPECT_EQ(bad([&](lk::LinearArgs& a) { a.x = reinterpret_cast<const char*>(x.data()) + 2; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([&](lk::LinearArgs& a) { a.bias = reinterpret_cast<const char*>(w.data()) + 1; }),
            cudaErrorInvalidValue);
  EXPECT_EQ(bad([&](lk::LinearArgs& a) {
              a.dt = lk::DType::BF16;
              a.y = reinterpret_cast<char*>(y.data()) + 1;
            }),
            cudaErrorInvalidValue);
  no_emulation_errors();
}

// Batch invariance: row `target` (fixed x row, fixed w and bias) placed at several positions of steps of M rows
// whose other rows are random (a new draw per case) gives the same bits as the 1-row step, through both load paths.
template <class E>
void invariance(uint64_t seed) {
  const int N = 80, K = 72;  // two column tiles (one partial), k tiles: 3 in fp32, 2 in 16-bit (one partial)
  const int lo = -8, hi = std::is_same_v<E, __half> ? 3 : 8;  // fp16: sums stay below its 65504
  std::mt19937 rng(seed);
  auto w = spread_vec<E>(size_t(N) * K, rng, lo, hi);
  const auto b = spread_vec<E>(N, rng, lo, hi);
  auto target = spread_vec<E>(K, rng, lo, hi);
  // Cancelling pairs of large products (+-2^20) in different 16-wide chunks of one stage (k = 5 and 21; 40 and
  // 60): the small products summed before the pair are absorbed into 2^20 and those after it are not, so another
  // order changes the leading bits of the result, visible even after rounding to bf16.
  for (const auto& [k1, k2] : {std::pair{5, 21}, std::pair{40, 60}}) {
    target[k1] = target[k2] = from_f<E>(1024.f);
    for (int n = 0; n < N; ++n) {
      const float c = n % 2 ? 1024.f : -1024.f;
      w[size_t(n) * K + k1] = from_f<E>(c);
      w[size_t(n) * K + k2] = from_f<E>(-c);
    }
  }
  const auto base = run_gemm<E>(1, N, K, target.data(), K, w.data(), K, b.data(), N);
  int cases = 0;
  for (int M : {1, 2, 15, 16, 17, 64, 255, 256}) {
    std::set<int> pos = {0, M - 1, M / 2};
    if (M > 17) pos.insert(17);  // row 1 of the second WMMA fragment / the third fp32 warp
    for (int r : pos) {
      // Odd cases go through the scalar path: the x rows one element apart from 16-byte alignment.
      const bool scalar = (cases++ % 2) == 1 && M > 1;
      const int64_t ldx = scalar ? K + 1 : K;
      std::vector<E> x = spread_vec<E>(size_t(M) * ldx + 1, rng, lo, hi);
      E* xr = x.data() + (scalar ? 1 : 0);
      std::memcpy(xr + int64_t(r) * ldx, target.data(), K * sizeof(E));
      const auto y = run_gemm<E>(M, N, K, xr, ldx, w.data(), K, b.data(), N + 5);
      ASSERT_EQ(std::memcmp(y.data() + int64_t(r) * (N + 5), base.data(), N * sizeof(E)), 0)
          << "M=" << M << " row " << r << (scalar ? " (scalar path)" : " (vector path)")
          << ": not the bits of the 1-row step";
    }
  }
}

TEST(SimtGemm, Fp32RowIsTheSameBitsAtEveryStepSize) { invariance<float>(11); }
TEST(SimtGemm, Fp16RowIsTheSameBitsAtEveryStepSize) { invariance<__half>(12); }
TEST(SimtGemm, Bf16RowIsTheSameBitsAtEveryStepSize) { invariance<__nv_bfloat16>(13); }

}  // namespace
