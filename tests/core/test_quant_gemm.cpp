// The quantized GEMM (include/lookahead/backend/cpu/gemm_quant.h) for every type it serves: the same bits as the float GEMM
// on the dequantized weights for every step size M = 1..40, every thread count and both ISA paths (so a row's
// result does not depend on the rest of the step), within rounding of a double reference; and a negative control:
// a kernel whose reduction order follows the step size is caught.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "lookahead/model/dtype.h"
#include "lookahead/backend/cpu/gemm.h"
#include "lookahead/backend/cpu/gemm_quant.h"
#include "lookahead/backend/cpu/isa.h"
#include "common/isa_paths.h"
#include "lookahead/model/quant.h"
#include "lookahead/backend/cpu/thread_pool.h"

using namespace la;

namespace {

using test::IsaGuard;

const QType kServed[] = {QType::Q8_0, QType::Q4_0, QType::Q4_1, QType::Q5_0,
                         QType::Q5_1, QType::Q4_K, QType::Q5_K, QType::Q6_K};

// N rows of K elements of type t: random code bytes, f16 scale fields set to moderate values (as real files).
struct QMatrix {
  uint32_t type;
  int N, K;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // the exact dequantized values, row-major
  QuantRows rows() const {
    QuantRows q{type, K, {}};
    const size_t rb = bytes.size() / size_t(N);
    for (int n = 0; n < N; ++n) q.rows.push_back(bytes.data() + size_t(n) * rb);
    return q;
  }
};

QMatrix make(QType t, int N, int K, uint32_t seed) {
  const QTypeInfo info = qtype_info(uint32_t(t));
  QMatrix m{uint32_t(t), N, K, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 0.02f);
  const int blocks = N * K / info.block;
  m.bytes.resize(size_t(blocks) * info.bytes);
  for (auto& b : m.bytes) b = uint8_t(rng());
  auto put_half = [&](uint8_t* p) {
    const uint16_t h = f32_to_f16(nd(rng));
    std::memcpy(p, &h, 2);
  };
  for (int i = 0; i < blocks; ++i) {
    uint8_t* b = m.bytes.data() + size_t(i) * info.bytes;
    switch (t) {
      case QType::Q4_1: case QType::Q5_1: case QType::Q4_K: case QType::Q5_K: put_half(b), put_half(b + 2); break;
      case QType::Q6_K: put_half(b + 208); break;
      default: put_half(b);
    }
  }
  m.deq.resize(size_t(N) * K);
  for (int n = 0; n < N; ++n)
    dequantize_row(uint32_t(t), m.bytes.data() + size_t(n) * (m.bytes.size() / N), m.deq.data() + size_t(n) * K, K);
  return m;
}

std::vector<float> rand_x(int M, int K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(size_t(M) * K);
  for (auto& v : x) v = u(rng);
  return x;
}

std::vector<float> run(ThreadPool& pool, const PackedWeight& w, const std::vector<float>& x, int M,
                       const std::vector<float>* bias = nullptr) {
  std::vector<float> y(size_t(M) * w.rows, 0.5f);
  gemm(pool, x.data(), M, w, GemmOut{y.data(), w.rows, bias ? bias->data() : nullptr, bias != nullptr});
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

constexpr int kN = 37, kK = 512, kMaxM = 40;  // 37 rows: a padded last panel

TEST(QuantGemm, SameBitsAsTheFloatGemmOnTheDequantizedWeightsForEveryStepSize) {
  IsaGuard g;
  ThreadPool pool(2);
  const auto x = rand_x(kMaxM, kK, 5);
  std::vector<float> bias(kN);
  for (int n = 0; n < kN; ++n) bias[n] = 0.01f * float(n - 18);
  for (QType t : kServed) {
    const QMatrix m = make(t, kN, kK, 100 + uint32_t(t));
    const PackedWeight q = pack_quant_weight(m.rows());
    const PackedWeight f = pack_weight(WeightView{m.deq.data(), WType::F32, kN, kK});
    for (CpuIsa isa : test::isa_paths()) {
      set_cpu_isa(isa);
      const auto full = run(pool, q, x, kMaxM);
      for (int M = 1; M <= kMaxM; ++M) {
        const auto yq = run(pool, q, x, M), yf = run(pool, f, x, M);
        ASSERT_TRUE(same_bits(yq, yf)) << qtype_name(uint32_t(t)) << " M=" << M << " " << cpu_isa_name(isa);
        // each row alone gives the bits it has inside the largest step
        ASSERT_EQ(std::memcmp(yq.data(), full.data(), yq.size() * 4), 0) << qtype_name(uint32_t(t)) << " M=" << M;
        ASSERT_TRUE(same_bits(run(pool, q, x, M, &bias), run(pool, f, x, M, &bias))) << "bias, accumulate";
      }
    }
  }
}

TEST(QuantGemm, ThreadCountsAndIsaPathsGiveTheSameBits) {
  IsaGuard g;
  const auto x = rand_x(kMaxM, kK, 9);
  for (QType t : kServed) {
    const QMatrix m = make(t, kN, kK, 200 + uint32_t(t));
    const PackedWeight q = pack_quant_weight(m.rows());
    std::vector<float> first;
    for (CpuIsa isa : test::isa_paths())
      for (int threads : {1, 2, 3}) {
        set_cpu_isa(isa);
        ThreadPool pool(threads);
        for (int M : {1, 7, 40}) {
          const auto y = run(pool, q, x, M);
          if (M != 40) continue;
          if (first.empty()) first = y;
          EXPECT_TRUE(same_bits(y, first)) << qtype_name(uint32_t(t)) << " threads " << threads;
        }
      }
  }
}

TEST(QuantGemm, WithinRoundingOfADoubleReference) {
  ThreadPool pool(2);
  const auto x = rand_x(8, kK, 13);
  for (QType t : kServed) {
    const QMatrix m = make(t, kN, kK, 300 + uint32_t(t));
    const auto y = run(pool, pack_quant_weight(m.rows()), x, 8);
    for (int i = 0; i < 8; ++i)
      for (int n = 0; n < kN; ++n) {
        double ref = 0, mag = 0;
        for (int k = 0; k < kK; ++k) {
          ref += double(m.deq[size_t(n) * kK + k]) * x[size_t(i) * kK + k];
          mag += std::fabs(double(m.deq[size_t(n) * kK + k]) * x[size_t(i) * kK + k]);
        }
        ASSERT_NEAR(y[size_t(i) * kN + n], ref, 1e-6 * mag + 1e-6) << qtype_name(uint32_t(t)) << " " << i << "," << n;
      }
  }
}

// Negative control: the checks above catch an order that follows the step size (here: k summed in two halves,
// then added, when M > 1, as a kernel splitting k for large steps would).
TEST(QuantGemm, NegativeControlAStepSizeDependentOrderIsCaught) {
  ThreadPool pool(1);
  const auto x = rand_x(kMaxM, kK, 21);
  const QMatrix m = make(QType::Q4_K, kN, kK, 400);
  const PackedWeight q = pack_quant_weight(m.rows());
  auto split_order = [&](int M) {  // rows computed as two half-k GEMMs when M > 1
    std::vector<float> y(size_t(M) * kN);
    for (int t = 0; t < M; ++t)
      for (int n = 0; n < kN; ++n) {
        float a = 0, b = 0;
        for (int k = 0; k < kK; ++k) {
          float& s = (M > 1 && k >= kK / 2) ? b : a;
          s = std::fma(m.deq[size_t(n) * kK + k], x[size_t(t) * kK + k], s);
        }
        y[size_t(t) * kN + n] = a + b;
      }
    return y;
  };
  const auto one = run(pool, q, x, 1);
  EXPECT_EQ(std::memcmp(split_order(1).data(), one.data(), one.size() * 4), 0);  // M = 1: the kernel's order
  const auto many = split_order(kMaxM);
  EXPECT_NE(std::memcmp(many.data(), run(pool, q, x, kMaxM).data(), many.size() * 4), 0)
      << "the step-size-dependent order went unnoticed";
}

}  // namespace
