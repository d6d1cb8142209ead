// The CPU kernels (src/backend/cpu): conversions, GEMM and attention against double references, and the property the
// lossless promise rests on in every dtype: a token's result is the same bits alone and inside any step, with
// any thread count, on either ISA path. A negative control (a GEMM whose k-chunking depends on the row count)
// shows the invariance check can fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "lookahead/backend/cpu/attention.h"
#include "lookahead/model/dtype.h"
#include "lookahead/backend/cpu/geglu.h"
#include "lookahead/backend/cpu/gemm.h"
#include "lookahead/backend/cpu/head_norm.h"
#include "lookahead/backend/cpu/isa.h"
#include "common/isa_paths.h"
#include "lookahead/backend/cpu/softcap.h"
#include "lookahead/backend/cpu/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../../src/backend/cpu/expf_lanes.h"  // private to src/backend/cpu: tested here directly

using namespace la;

namespace {

const WType kTypes[] = {WType::F32, WType::BF16, WType::F16};
const char* name(WType t) { return t == WType::F32 ? "f32" : t == WType::BF16 ? "bf16" : "f16"; }

using test::IsaGuard;

// A weight of type t (raw bytes) with values drawn in [-1, 1), and its exact fp32 values.
struct Weight {
  std::vector<uint8_t> raw;
  std::vector<float> f;
  WeightView view;      // row-major, as loaded
  PackedWeight packed;  // the GEMM's panel copy
};
Weight make_weight(int N, int K, WType t, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Weight w;
  w.raw.resize(size_t(N) * K * wtype_size(t));
  w.f.resize(size_t(N) * K);
  for (size_t i = 0; i < w.f.size(); ++i) {
    store_from_f32(w.raw.data(), t, long(i), u(rng));
    w.f[i] = load_f32(w.raw.data(), t, long(i));
  }
  w.view = WeightView{w.raw.data(), t, N, K};
  w.packed = pack_weight(w.view);
  return w;
}
std::vector<float> randv(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

#if defined(__x86_64__)
LA_AVX2 void avx2_exp8(const float* x, float* y) { _mm256_storeu_ps(y, expf_lanes_avx2(_mm256_loadu_ps(x))); }
__attribute__((target("f16c"))) float hw_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t hw_f32_to_f16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
#endif

using GemmFn = std::function<void(const float* x, int M, const Weight& w, float* y)>;

// The invariance check: each of M rows computed inside the M-row product equals the row computed alone, to the bit.
// Returns the number of differing elements.
long row_invariance_violations(const GemmFn& f, const Weight& w, int M, std::mt19937& rng) {
  const int N = w.view.rows, K = w.view.cols;
  auto x = randv(size_t(M) * K, rng);
  std::vector<float> all(size_t(M) * N), one(N);
  f(x.data(), M, w, all.data());
  long bad = 0;
  for (int t = 0; t < M; ++t) {
    f(x.data() + size_t(t) * K, 1, w, one.data());
    bad += std::memcmp(one.data(), all.data() + size_t(t) * N, N * 4) != 0;
  }
  return bad;
}

GemmFn pool_gemm(ThreadPool& pool) {
  return [&](const float* x, int M, const Weight& w, float* y) {
    gemm(pool, x, M, w.packed, GemmOut{y, w.view.rows});
  };
}

}  // namespace

TEST(CpuDtype, Fp16ConversionsMatchF16CAndRoundToNearestEven) {
  // Widening: every fp16 bit pattern (NaNs compared as NaN).
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << std::hex << h;  // narrowing an fp16 value is exact
  }
  // Ties go to even; overflow to infinity; tiny values to (signed) zero or subnormals.
  EXPECT_EQ(f32_to_f16(1.f + 1.f / 2048), f32_to_f16(1.f));           // halfway between 1 and 1+2^-10: even
  EXPECT_EQ(f32_to_f16(1.f + 3.f / 2048), f32_to_f16(1.f + 2.f / 1024));
  EXPECT_EQ(f32_to_f16(70000.f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e-10f), 0x8000);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(f32_to_bf16(1.f + 1.f / 256), f32_to_bf16(1.f));          // bf16 tie to even
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(3.5f)), 3.5f);
#if defined(__x86_64__)
  if (detected_cpu_isa() < CpuIsa::Avx2) GTEST_SKIP() << "no F16C to compare with";
  std::mt19937 rng(1);
  for (uint32_t h = 0; h < 65536; ++h) {
    const float hw = hw_f16_to_f32(uint16_t(h)), sw = f16_to_f32(uint16_t(h));
    if (std::isnan(hw)) { EXPECT_TRUE(std::isnan(sw)); continue; }
    EXPECT_EQ(std::memcmp(&hw, &sw, 4), 0) << std::hex << h;
  }
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), hw_f32_to_f16(f)) << f;
  }
#endif
}

TEST(CpuExp, WithinTwoUlpOfExpAndTheSameBitsOnBothIsaPaths) {
  std::vector<float> xs;
  for (float x = -90.f; x <= 90.f; x += 0.00731f) xs.push_back(x);
  for (float x : {0.f, -0.f, 1e-30f, -1e-30f, -87.f, 88.f, -87.0001f, 88.0001f, 1000.f, -1000.f, INFINITY, -INFINITY})
    xs.push_back(x);
  xs.push_back(NAN);
  while (xs.size() % 8) xs.push_back(0.5f);
  for (float x : xs) {
    const float y = expf_lanes(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(y));
    } else if (x < -87.f) {
      EXPECT_EQ(y, 0.f) << x;
    } else if (x > 88.f) {
      EXPECT_EQ(y, INFINITY) << x;
    } else {
      const double ref = std::exp(double(x));
      EXPECT_LE(std::fabs(y - ref), 2.0 * std::fabs(std::nextafter(float(ref), INFINITY) - float(ref))) << x;
    }
  }
#if defined(__x86_64__)
  if (detected_cpu_isa() < CpuIsa::Avx2) GTEST_SKIP() << "no AVX2 path on this CPU";
  std::vector<float> v(xs.size());
  for (size_t i = 0; i < xs.size(); i += 8) avx2_exp8(xs.data() + i, v.data() + i);
  for (size_t i = 0; i < xs.size(); ++i) {
    const float s = expf_lanes(xs[i]);
    EXPECT_TRUE(std::memcmp(&s, &v[i], 4) == 0 || (std::isnan(s) && std::isnan(v[i]))) << xs[i];
  }
#endif
}

TEST(CpuThreadPool, EveryParticipantRunsOncePerRegion) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    std::vector<int> hits(threads);
    for (int r = 0; r < 2000; ++r)
      pool.run([&](int i, int n) {
        ASSERT_EQ(n, threads);
        ++hits[i];
      });
    for (int i = 0; i < threads; ++i) EXPECT_EQ(hits[i], 2000) << threads;
  }
}

TEST(CpuGemm, MatchesADoubleReferenceOnEveryShapeClassAndType) {
  std::mt19937 rng(2);
  ThreadPool pool(2);
  IsaGuard g;
  for (CpuIsa isa : test::isa_paths()) {
    set_cpu_isa(isa);
    for (WType t : kTypes)
      for (int K : {1, 7, 8, 9, 24, 61, 300})
        for (int N : {1, 3, 4, 5, 13, 64})
          for (int M : {1, 2, 3, 4, 7, 33}) {
            Weight w = make_weight(N, K, t, rng);
            auto x = randv(size_t(M) * K, rng);
            auto bias = randv(N, rng);
            std::vector<float> y(size_t(M) * N, 0.5f);
            gemm(pool, x.data(), M, w.packed, GemmOut{y.data(), N, bias.data(), true});
            for (int m = 0; m < M; ++m)
              for (int n = 0; n < N; ++n) {
                double ref = 0.5 + bias[n];
                for (int k = 0; k < K; ++k) ref += double(x[size_t(m) * K + k]) * w.f[size_t(n) * K + k];
                ASSERT_NEAR(y[size_t(m) * N + n], ref, 1e-5 * (K + 2)) << name(t) << " M" << M << " N" << N << " K" << K;
              }
          }
  }
}

TEST(CpuGemm, ARowsResultIsTheSameBitsAloneAndInsideAnyStep) {
  std::mt19937 rng(3);
  IsaGuard g;
  for (CpuIsa isa : test::isa_paths()) {
    set_cpu_isa(isa);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (WType t : kTypes) {
        // 61: a K tail and a 1-row edge tile; 2000 x 130: large enough to split over the threads.
        for (auto [N, K] : {std::pair{61, 37}, std::pair{130, 2000}}) {
          Weight w = make_weight(N, K, t, rng);
          for (int M : {2, 3, 4, 5, 6, 7, 9, 10, 11, 16, 18, 64, 256, 300})
            EXPECT_EQ(row_invariance_violations(pool_gemm(pool), w, M, rng), 0)
                << cpu_isa_name(isa) << " " << name(t) << " threads " << threads << " M " << M << " K " << K;
        }
      }
    }
  }
}

TEST(CpuGemm, ThreadCountsAndIsaPathsGiveTheSameBits) {
  if (detected_cpu_isa() < CpuIsa::Avx2) GTEST_SKIP() << "only the portable path runs on this CPU";
  std::mt19937 rng(4);
  IsaGuard g;
  for (WType t : kTypes)
    for (int M : {1, 5, 13, 40, 49}) {  // 13, 49: 8-row AVX-512 tiles and a remainder tile (5, 1 rows)
      Weight w = make_weight(203, 579, t, rng);
      auto x = randv(size_t(M) * 579, rng);
      std::vector<float> ref;
      for (CpuIsa isa : test::isa_paths())
        for (int threads : {1, 2, 4}) {
          set_cpu_isa(isa);
          ThreadPool pool(threads);
          std::vector<float> y(size_t(M) * 203);
          gemm(pool, x.data(), M, w.packed, GemmOut{y.data(), 203});
          if (ref.empty()) ref = y;
          EXPECT_EQ(std::memcmp(ref.data(), y.data(), y.size() * 4), 0)
              << name(t) << " M " << M << " " << cpu_isa_name(isa) << " threads " << threads;
        }
    }
}

// Negative control: a GEMM that splits k into two halves when the step has more than 4 rows (as a kernel tuned per
// step size might) rounds differently, and the invariance check above must say so.
TEST(CpuGemm, NegativeControlAStepSizeDependentChunkingIsCaught) {
  std::mt19937 rng(5);
  GemmFn chunked = [](const float* x, int M, const Weight& wt, float* y) {
    const WeightView& w = wt.view;
    const int K = w.cols, split = M > 4 ? K / 2 : K;
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < w.rows; ++n) {
        float a = 0, b = 0;
        const float* wr = static_cast<const float*>(w.data) + size_t(n) * K;
        for (int k = 0; k < split; ++k) a += x[size_t(m) * K + k] * wr[k];
        for (int k = split; k < K; ++k) b += x[size_t(m) * K + k] * wr[k];
        y[size_t(m) * w.rows + n] = a + b;
      }
  };
  Weight w = make_weight(64, 300, WType::F32, rng);
  EXPECT_EQ(row_invariance_violations(chunked, w, 3, rng), 0);  // below the switch: invariant
  EXPECT_GT(row_invariance_violations(chunked, w, 16, rng), 0);  // above it: caught
}

// ---- attention ---------------------------------------------------------------------------------------------------

namespace {

struct AttnCase {
  AttentionShape s;
  WType type;
  int L, T;
  std::vector<int32_t> parents;
  std::vector<uint8_t> k, v;  // [L + T, kv_heads, D] of `type`
  std::vector<float> q;       // [T, heads * D]
};

AttnCase make_attn(int heads, int kv, int D, WType t, int L, int T, std::mt19937& rng) {
  AttnCase c{{heads, kv, D, 1.f / std::sqrt(float(D))}, t, L, T, {}, {}, {}, {}};
  for (int i = 0; i < T; ++i) c.parents.push_back(i == 0 ? -1 : int(rng() % (i + 1)) - 1);
  const size_t n = size_t(L + T) * kv * D;
  c.k.resize(n * wtype_size(t));
  c.v.resize(n * wtype_size(t));
  auto kf = randv(n, rng), vf = randv(n, rng);
  for (size_t i = 0; i < n; ++i) {
    store_from_f32(c.k.data(), t, long(i), kf[i] * 2);
    store_from_f32(c.v.data(), t, long(i), vf[i]);
  }
  c.q = randv(size_t(T) * heads * D, rng);
  return c;
}

std::vector<float> run_attn(ThreadPool& pool, const AttnCase& c) {
  AttentionScratch s;
  s.reserve(pool.size(), c.s.heads / c.s.kv_heads, c.L + c.T);
  const int Q = c.s.heads * c.s.head_dim;
  std::vector<float> out(size_t(c.T) * Q);
  step_attention(pool, s, c.s, c.q.data(), Q, KvLayer{c.k.data(), c.v.data(), c.type}, c.L, c.parents.data(), c.T,
                 out.data(), Q);
  return out;
}

// Token t of the tree as plain decoding sees it: its ancestors moved into the cache after the L rows, in order, and
// t alone as a one-token step.
AttnCase alone(const AttnCase& c, int t) {
  std::vector<int> path;
  for (int a = t; a >= 0; a = c.parents[a]) path.insert(path.begin(), a);
  AttnCase a = c;
  const int D = c.s.head_dim, row = c.s.kv_heads * D * wtype_size(c.type);
  a.L = c.L + int(path.size()) - 1;
  a.T = 1;
  a.parents = {-1};
  a.k.resize(size_t(a.L + 1) * row);
  a.v.resize(size_t(a.L + 1) * row);
  for (size_t j = 0; j < path.size(); ++j) {
    std::memcpy(a.k.data() + (c.L + j) * row, c.k.data() + (c.L + path[j]) * row, row);
    std::memcpy(a.v.data() + (c.L + j) * row, c.v.data() + (c.L + path[j]) * row, row);
  }
  a.q.assign(c.q.begin() + size_t(t) * c.s.heads * D, c.q.begin() + size_t(t + 1) * c.s.heads * D);
  return a;
}

}  // namespace

TEST(CpuAttention, MatchesADoubleSoftmaxReference) {
  std::mt19937 rng(6);
  ThreadPool pool(2);
  // D = 12: the 8-lane body and a tail; 64 and 136: the 64-lane register blocks of the AVX2 weighted sum, + rest.
  for (WType t : kTypes)
    for (int D : {12, 64, 136}) {
    AttnCase c = make_attn(6, 2, D, t, 9, 7, rng);
    auto out = run_attn(pool, c);
    const int g = 3;
    for (int i = 0; i < c.T; ++i)
      for (int h = 0; h < 6; ++h) {
        std::vector<int> keys;
        for (int j = 0; j < c.L; ++j) keys.push_back(j);
        std::vector<int> anc;
        for (int a = i; a >= 0; a = c.parents[a]) anc.insert(anc.begin(), c.L + a);
        keys.insert(keys.end(), anc.begin(), anc.end());
        std::vector<double> sc;
        double m = -1e300, sum = 0;
        for (int j : keys) {
          double d = 0;
          for (int e = 0; e < D; ++e)
            d += double(c.q[size_t(i) * 6 * D + h * D + e]) * load_f32(c.k.data(), t, long(j) * 2 * D + (h / g) * D + e);
          sc.push_back(d * c.s.scale);
          m = std::max(m, sc.back());
        }
        for (auto& x : sc) sum += (x = std::exp(x - m));
        for (int e = 0; e < D; ++e) {
          double o = 0;
          for (size_t j = 0; j < keys.size(); ++j) o += sc[j] / sum * load_f32(c.v.data(), t, long(keys[j]) * 2 * D + (h / g) * D + e);
          ASSERT_NEAR(out[size_t(i) * 6 * D + h * D + e], o, 2e-5) << name(t) << " D " << D << " token " << i << " head " << h;
        }
      }
    }
}

TEST(CpuAttention, IsaPathsAndThreadCountsGiveTheSameBits) {
  if (detected_cpu_isa() < CpuIsa::Avx2) GTEST_SKIP() << "only the portable path runs on this CPU";
  std::mt19937 rng(8);
  IsaGuard g;
  // Query heads per K/V head g = 1, 2, 3 (one AVX2 head group), 4, 5 and 7 (groups of 3 and what is left); D a
  // multiple of 32 (the grouped weighted sum) or not (one head at a time).
  const int shapes[][2] = {{6, 2}, {2, 2}, {4, 2}, {4, 1}, {5, 1}, {7, 1}};
  for (const auto& hk : shapes)
    for (WType t : kTypes)
      for (int D : {8, 12, 32, 64, 72, 136})
        for (int L : {0, 5, 33}) {  // key counts on and off the 4-key groups of the AVX2 scores
          AttnCase c = make_attn(hk[0], hk[1], D, t, L, 11, rng);
          std::vector<float> ref;
          for (CpuIsa isa : test::isa_paths())
            for (int threads : {1, 2}) {
              set_cpu_isa(isa);
              ThreadPool pool(threads);
              auto out = run_attn(pool, c);
              if (ref.empty()) ref = out;
              EXPECT_EQ(std::memcmp(ref.data(), out.data(), out.size() * 4), 0)
                  << "heads " << hk[0] << "/" << hk[1] << " " << name(t) << " D " << D << " L " << L << " "
                  << cpu_isa_name(isa) << " threads " << threads;
            }
        }
}

TEST(CpuAttention, ATokensOutputIsTheSameBitsAloneAndInsideAnyTree) {
  std::mt19937 rng(7);
  IsaGuard g;
  for (CpuIsa isa : test::isa_paths()) {
    set_cpu_isa(isa);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      for (WType t : kTypes)
        for (int T : {1, 2, 5, 17, 64, 256})
          for (int L : {0, 3, 40}) {
            AttnCase c = make_attn(4, 2, 16, t, L, T, rng);
            auto out = run_attn(pool, c);
            const int Q = 4 * 16;
            for (int i = 0; i < T; i += std::max(1, T / 9)) {
              auto a = alone(c, i);
              auto one = run_attn(pool, a);
              EXPECT_EQ(std::memcmp(one.data(), out.data() + size_t(i) * Q, Q * 4), 0)
                  << cpu_isa_name(isa) << " threads " << threads << " " << name(t) << " T " << T << " L " << L
                  << " token " << i;
            }
          }
    }
  }
}

// ---- The architectures' kernels (Gemma-2's soft-cap and every sliding window in step attention; q/k norms,
// GeGLU, final soft-cap) ----
namespace {

// Step positions of a tree after L cache rows: L + depth (as the engine lays out a step).
std::vector<int32_t> tree_positions(const std::vector<int32_t>& parents, int L) {
  std::vector<int32_t> pos;
  for (size_t i = 0; i < parents.size(); ++i) pos.push_back(parents[i] < 0 ? L : pos[parents[i]] + 1);
  return pos;
}

std::vector<float> run_attn_pos(ThreadPool& pool, const AttnCase& c, const std::vector<int32_t>& pos) {
  AttentionScratch s;
  s.reserve(pool.size(), c.s.heads / c.s.kv_heads, c.L + c.T);
  const int Q = c.s.heads * c.s.head_dim;
  std::vector<float> out(size_t(c.T) * Q);
  step_attention(pool, s, c.s, c.q.data(), Q, KvLayer{c.k.data(), c.v.data(), c.type}, c.L, c.parents.data(), c.T,
                 out.data(), Q, pos.data());
  return out;
}

// A deep random tree (parents mostly the previous one or two nodes), so paths run past small windows.
void deepen(AttnCase& c, std::mt19937& rng) {
  for (int i = 1; i < c.T; ++i) c.parents[i] = rng() % 4 == 0 ? int(rng() % i) : std::max(0, i - 1 - int(rng() % 2));
}

}  // namespace

// Keys at positions <= pos - window are dropped (the edge exactly), scores soft-capped before the softmax: against
// a double reference that builds each token's key list from positions alone.
TEST(CpuAttention, WindowAndSoftcapMatchADoubleReference) {
  std::mt19937 rng(8);
  ThreadPool pool(2);
  for (WType t : kTypes)
    for (int window : {1, 3, 6})
      for (float cap : {0.f, 1.5f}) {
        AttnCase c = make_attn(6, 2, 12, t, 9, 16, rng);
        deepen(c, rng);
        c.s.window = window;
        c.s.softcap = cap;
        const auto pos = tree_positions(c.parents, c.L);
        auto out = run_attn_pos(pool, c, pos);
        const int D = 12, g = 3;
        for (int i = 0; i < c.T; ++i)
          for (int h = 0; h < 6; ++h) {
            std::vector<int> keys;  // cache row r holds position r; step token a sits at row L + a
            for (int j = 0; j < c.L; ++j)
              if (j > pos[i] - window) keys.push_back(j);
            std::vector<int> anc;
            for (int a = i; a >= 0; a = c.parents[a])
              if (pos[a] > pos[i] - window) anc.insert(anc.begin(), c.L + a);
            keys.insert(keys.end(), anc.begin(), anc.end());
            ASSERT_LE(int(keys.size()), window);
            std::vector<double> sc;
            double m = -1e300, sum = 0;
            for (int j : keys) {
              double d = 0;
              for (int e = 0; e < D; ++e)
                d += double(c.q[size_t(i) * 6 * D + h * D + e]) * load_f32(c.k.data(), t, long(j) * 2 * D + (h / g) * D + e);
              d *= c.s.scale;
              if (cap > 0) d = cap * std::tanh(d / cap);
              sc.push_back(d);
              m = std::max(m, d);
            }
            for (auto& x : sc) sum += (x = std::exp(x - m));
            for (int e = 0; e < D; ++e) {
              double o = 0;
              for (size_t j = 0; j < keys.size(); ++j)
                o += sc[j] / sum * load_f32(c.v.data(), t, long(keys[j]) * 2 * D + (h / g) * D + e);
              ASSERT_NEAR(out[size_t(i) * 6 * D + h * D + e], o, 2e-5)
                  << name(t) << " window " << window << " cap " << cap << " token " << i << " head " << h;
            }
          }
      }
}

// Batch invariance with a window: a token deep in a tree (its window partly in the cache, partly on its path, or
// on its path alone) gives the bits of the same token decoded alone after its path, on both ISA paths.
TEST(CpuAttention, AWindowedTokensOutputIsTheSameBitsAloneAndInsideAnyTree) {
  std::mt19937 rng(9);
  IsaGuard guard;
  for (CpuIsa isa : test::isa_paths()) {
    set_cpu_isa(isa);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      for (WType t : kTypes)
        for (int window : {2, 5, 9})
          for (int L : {0, 4, 30}) {
            AttnCase c = make_attn(4, 2, 16, t, L, 40, rng);
            deepen(c, rng);
            c.s.window = window;
            c.s.softcap = 2.f;
            const auto pos = tree_positions(c.parents, c.L);
            auto out = run_attn_pos(pool, c, pos);
            const int Q = 4 * 16;
            for (int i = 0; i < c.T; i += 3) {
              auto a = alone(c, i);
              const std::vector<int32_t> p1{pos[i]};
              ASSERT_EQ(a.L, pos[i]);
              auto one = run_attn_pos(pool, a, p1);
              EXPECT_EQ(std::memcmp(one.data(), out.data() + size_t(i) * Q, Q * 4), 0)
                  << cpu_isa_name(isa) << " threads " << threads << " " << name(t) << " window " << window << " L "
                  << L << " token " << i << " at position " << pos[i];
            }
          }
    }
  }
}

// The element-wise kernels of the architectures against double formulas: per-head RMSNorm (q/k norms), GeGLU with
// the tanh GELU, soft-capping.
TEST(CpuElementwise, HeadNormGegluAndSoftcapMatchTheirFormulas) {
  std::mt19937 rng(10);
  ThreadPool pool(2);
  const int T = 5, heads = 3, D = 16, ld = heads * D + 7;
  auto x = randv(size_t(T) * ld, rng), w = randv(D, rng), y = x;
  rms_norm_heads(pool, y.data(), ld, T, heads, D, w.data(), 1e-6f);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h) {
      const float* v = x.data() + size_t(t) * ld + h * D;
      double ss = 0;
      for (int d = 0; d < D; ++d) ss += double(v[d]) * v[d];
      const double r = 1 / std::sqrt(ss / D + 1e-6);
      for (int d = 0; d < D; ++d) ASSERT_NEAR(y[size_t(t) * ld + h * D + d], v[d] * r * w[d], 1e-5) << t << " " << h;
    }
  for (int i = heads * D; i < ld; ++i) ASSERT_EQ(y[i], x[i]);  // past the heads: untouched

  const int I = 37;
  auto gu = randv(size_t(T) * 2 * I, rng);
  for (auto& g : gu) g *= 4;
  std::vector<float> act(size_t(T) * I);
  geglu_rows(pool, gu.data(), 2 * I, T, I, act.data(), I);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < I; ++i) {
      const double g = gu[size_t(t) * 2 * I + i], u = gu[size_t(t) * 2 * I + I + i];
      const double gelu = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
      ASSERT_NEAR(act[size_t(t) * I + i], gelu * u, 1e-5) << t << " " << i;
    }

  auto lg = randv(size_t(T) * 50, rng);
  for (auto& v : lg) v *= 30;
  auto capped = lg;
  softcap_rows(pool, capped.data(), 50, T, 50, 5.f);
  for (size_t i = 0; i < lg.size(); ++i) ASSERT_NEAR(capped[i], 5 * std::tanh(lg[i] / 5.0), 1e-5) << i;
}
