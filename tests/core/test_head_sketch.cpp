// The sketched greedy head (include/lookahead/backend/cpu/head_sketch.h): its argmax is the full GEMM's argmax
// row for row, in every dtype, on both ISA paths and thread counts, on heads built to make the int8 sketch rank
// rows wrongly (near-duplicate rows, rows a few ulps apart, exact ties, a padded last panel), and on heads built
// so that the proxy ranks a decoy first by nearly the whole bound; there a bound at 0.7 of the stated one is
// caught (the negative control). Non-finite weights and activations the sketch cannot bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "lookahead/backend/cpu/gemm.h"
#include "lookahead/backend/cpu/head_sketch.h"
#include "lookahead/backend/cpu/isa.h"
#include "common/isa_paths.h"
#include "lookahead/backend/cpu/thread_pool.h"
#include "lookahead/model/dtype.h"

using namespace la;

namespace {

using test::IsaGuard;

struct Head {
  std::vector<uint8_t> raw;
  std::vector<float> f;  // the values as stored in the dtype
  PackedWeight packed;
};

// V rows of K: base rows drawn in [-1, 1), then rows close to an earlier row (a few elements moved by far less
// than the int8 step, or every element by a few ulps), exact copies (ties, lowest index wins) and, when asked, a
// row holding a NaN.
Head make_head(int V, int K, WType t, std::mt19937& rng, bool nan_row = false) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> pick(0, 31);
  std::vector<float> f(size_t(V) * K);
  for (int n = 0; n < V; ++n) {
    float* r = f.data() + size_t(n) * K;
    const int kind = n < 32 ? 0 : n % 4;
    if (kind == 0) {
      for (int k = 0; k < K; ++k) r[k] = u(rng);
    } else {
      const float* src = f.data() + size_t(pick(rng)) * K;
      for (int k = 0; k < K; ++k) r[k] = src[k];
      if (kind == 1)  // near: the int8 sketch cannot tell it from its source
        for (int j = 0; j < 4; ++j) r[std::uniform_int_distribution<int>(0, K - 1)(rng)] += u(rng) * 2e-3f;
      if (kind == 2)  // nearer: its logit and its source's differ in the last bits, so the GEMM's exact order decides
        for (int k = 0; k < K; ++k) r[k] *= 1.f + u(rng) * 4e-7f;
    }
  }
  if (nan_row) f[size_t(V / 2) * K + 3] = std::numeric_limits<float>::quiet_NaN();
  Head h;
  h.raw.resize(f.size() * wtype_size(t));
  h.f.resize(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    store_from_f32(h.raw.data(), t, long(i), f[i]);
    h.f[i] = load_f32(h.raw.data(), t, long(i));
  }
  h.packed = pack_weight(WeightView{h.raw.data(), t, V, K});
  return h;
}

// The full head's argmax of each row (CpuForward::argmax's rule: first NaN, else first maximum).
std::vector<int32_t> full_argmax(ThreadPool& pool, const PackedWeight& w, const std::vector<float>& x, int M) {
  const int V = w.rows;
  std::vector<float> y(size_t(M) * V);
  gemm(pool, x.data(), M, w, GemmOut{y.data(), V});
  std::vector<int32_t> out(M);
  for (int t = 0; t < M; ++t) {
    const float* r = y.data() + size_t(t) * V;
    int best = 0;
    for (int i = 1; i < V; ++i)
      if (r[i] > r[best] || (std::isnan(r[i]) && !std::isnan(r[best]))) best = i;
    out[t] = best;
  }
  return out;
}

// Token rows near the head's rows (so the top logits are near-ties among a row and its neighbours), plus noise.
std::vector<float> make_x(const Head& h, int M, std::mt19937& rng) {
  const int V = h.packed.rows, K = h.packed.cols;
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> row(0, V - 1);
  std::vector<float> x(size_t(M) * K);
  for (int t = 0; t < M; ++t) {
    int n = row(rng);
    while (!std::isfinite(h.f[size_t(n) * K + 3])) n = row(rng);  // near a finite row
    for (int k = 0; k < K; ++k) x[size_t(t) * K + k] = h.f[size_t(n) * K + k] * 3.f + 0.3f * u(rng);
  }
  return x;
}

struct Tally {
  long rows = 0, wrong = 0, proxy_wrong = 0, candidates = 0;
};

// Runs the sketch against the full head on `trials` random steps of 1-4 rows; counts rows whose answer differs
// (must be none), rows where the sketch's proxy a[n] alone would have ranked wrongly (the case the bound is for),
// and the candidates computed exactly.
Tally compare(ThreadPool& pool, const Head& h, const HeadSketch& s, int trials, std::mt19937& rng) {
  Tally tl;
  SketchScratch sc;
  const int V = h.packed.rows;
  for (int i = 0; i < trials; ++i) {
    const int M = 1 + i % 4;
    const auto x = make_x(h, M, rng);
    const auto want = full_argmax(pool, h.packed, x, M);
    std::vector<int32_t> got(M, -7);
    EXPECT_TRUE(sketch_argmax(pool, s, h.packed, x.data(), M, got.data(), sc));
    for (int t = 0; t < M; ++t) {
      ++tl.rows;
      tl.wrong += got[t] != want[t];
      int proxy = 0;
      for (int n = 1; n < V; ++n)
        if (sc.a[size_t(t) * V + n] > sc.a[size_t(t) * V + proxy]) proxy = n;
      tl.proxy_wrong += proxy != want[t];
      for (int j = 0; j < pool.size(); ++j) tl.candidates += sc.cands[size_t(j) * M + t];
    }
  }
  return tl;
}

}  // namespace

TEST(HeadSketch, ArgmaxIsTheFullHeadsOnEveryTypeIsaPathAndThreadCount) {
  IsaGuard guard;
  for (WType t : {WType::F32, WType::BF16, WType::F16})
    for (CpuIsa isa : test::isa_paths())
      for (int threads : {1, 2}) {
        set_cpu_isa(isa);
        ThreadPool pool(threads);
        std::mt19937 rng(7);
        const Head h = make_head(523, 96, t, rng);  // 523: the last panel padded
        const HeadSketch s = build_head_sketch(pool, h.packed);
        const Tally tl = compare(pool, h, s, 120, rng);
        SCOPED_TRACE(std::string(cpu_isa_name(isa)) + " " + std::to_string(threads) + " threads, dtype " +
                     std::to_string(int(t)));
        EXPECT_EQ(tl.wrong, 0) << "of " << tl.rows << " rows";
        EXPECT_GT(tl.proxy_wrong, 0) << "the heads never made the int8 proxy rank wrongly: the check is weak";
        EXPECT_LT(tl.candidates, tl.rows * 523 / 4) << "the sketch pruned little";
      }
}

namespace {

// A head built against one token row x (fp32, K a multiple of 32, |x| in [0.9, 1]) where the int8 proxy ranks a
// decoy first: every group's scale is 1/127 (an element at 1.0), the true row A sits 0.49 of a step above small
// codes along sign(x), the decoy C has codes one step higher on the 28 largest |x| of the group's other 31 and sits
// 0.49 below them. C's proxy beats A's by about 0.9 sum |x| / 127 while A's logit beats C's: only a bound of at
// least about 0.8 of the stated one keeps A a candidate (the bound is tight here, its E term dominating). Rows
// 0 .. 15 are small fill; A and C are rows 16 and 17 in either order.
Head adversarial_head(const std::vector<float>& x, bool decoy_first, std::mt19937& rng) {
  const int K = int(x.size()), V = 18;
  std::uniform_int_distribution<int> code(1, 8);
  std::uniform_real_distribution<float> u(-0.01f, 0.01f);
  std::vector<float> f(size_t(V) * K);
  for (int n = 0; n < 16; ++n)
    for (int k = 0; k < K; ++k) f[size_t(n) * K + k] = u(rng);
  float* A = f.data() + size_t(decoy_first ? 17 : 16) * K;
  float* C = f.data() + size_t(decoy_first ? 16 : 17) * K;
  const float step = 1.f / 127.f;
  for (int g = 0; g < K / 32; ++g) {
    // |x| order within the group, the anchor (code 127) at its smallest |x|
    std::vector<int> ks(32);
    for (int i = 0; i < 32; ++i) ks[i] = g * 32 + i;
    std::sort(ks.begin(), ks.end(), [&](int a, int b) { return std::fabs(x[a]) > std::fabs(x[b]); });
    for (int i = 0; i < 32; ++i) {
      const int k = ks[i];
      if (i == 31) {
        A[k] = C[k] = 1.f;
        continue;
      }
      const float sg = x[k] >= 0 ? 1.f : -1.f;
      const int c = int(sg) * code(rng);
      const int bump = i < 28 ? int(sg) : 0;  // the 28 largest |x| of 31
      A[k] = (float(c) + 0.49f * sg) * step;
      C[k] = (float(c + bump) - 0.49f * sg) * step;
    }
  }
  Head h;
  h.f = f;
  h.raw.resize(f.size() * 4);
  for (size_t i = 0; i < f.size(); ++i) store_from_f32(h.raw.data(), WType::F32, long(i), f[i]);
  h.packed = pack_weight(WeightView{h.raw.data(), WType::F32, V, K});
  return h;
}

// Over `trials` adversarial heads: rows where the sketch's answer differs from the full head's, and rows where
// the proxy alone ranked wrongly.
std::pair<int, int> adversarial_errors(int trials, float shrink) {
  ThreadPool pool(1);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  int wrong = 0, proxy_wrong = 0;
  for (int i = 0; i < trials; ++i) {
    std::vector<float> x(64);
    for (float& v : x) v = (u(rng) < 0 ? -1.f : 1.f) * (0.95f + 0.05f * u(rng));
    const Head h = adversarial_head(x, i % 2 == 0, rng);
    HeadSketch s = build_head_sketch(pool, h.packed);
    for (float& b : s.beta) b *= shrink;
    SketchScratch sc;
    int32_t got = -7;
    EXPECT_TRUE(sketch_argmax(pool, s, h.packed, x.data(), 1, &got, sc));
    const int32_t want = full_argmax(pool, h.packed, x, 1)[0];
    int proxy = 0;
    for (int n = 1; n < h.packed.rows; ++n)
      if (sc.a[size_t(n)] > sc.a[size_t(proxy)]) proxy = n;
    wrong += got != want;
    proxy_wrong += proxy != want;
  }
  return {wrong, proxy_wrong};
}

}  // namespace

TEST(HeadSketch, AdversarialHeadsWhereTheProxyRanksADecoyFirst) {
  const auto [wrong, proxy_wrong] = adversarial_errors(40, 1.f);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(proxy_wrong, 40) << "the construction no longer fools the proxy";
  // The same heads with the bound at 0.7 of its value: the true row is pruned, the check fails.
  EXPECT_GT(adversarial_errors(40, 0.7f).first, 0) << "a bound at 0.7 of the stated one was never caught";
}

TEST(HeadSketch, NonFiniteWeightsAreAlwaysCandidates) {
  ThreadPool pool(2);
  std::mt19937 rng(3);
  const Head h = make_head(200, 64, WType::F32, rng, /*nan_row=*/true);
  const HeadSketch s = build_head_sketch(pool, h.packed);
  EXPECT_EQ(s.always[100], 1);
  const Tally tl = compare(pool, h, s, 20, rng);
  EXPECT_EQ(tl.wrong, 0);  // the NaN row wins every row, as in the full head's argmax
}

TEST(HeadSketch, DeclinesActivationsItCannotBound) {
  ThreadPool pool(1);
  std::mt19937 rng(5);
  const Head h = make_head(64, 32, WType::F32, rng);
  const HeadSketch s = build_head_sketch(pool, h.packed);
  SketchScratch sc;
  std::vector<float> x(32, 0.5f);
  int32_t out = -7;
  x[3] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(sketch_argmax(pool, s, h.packed, x.data(), 1, &out, sc));
  x[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(sketch_argmax(pool, s, h.packed, x.data(), 1, &out, sc));
  x[3] = 1e37f;  // finite, but a partial sum could overflow
  EXPECT_FALSE(sketch_argmax(pool, s, h.packed, x.data(), 1, &out, sc));
  EXPECT_EQ(out, -7);
  x[3] = 0.5f;
  EXPECT_TRUE(sketch_argmax(pool, s, h.packed, x.data(), 1, &out, sc));
  EXPECT_EQ(out, full_argmax(pool, h.packed, x, 1)[0]);
}

TEST(HeadSketch, OnlyFloatHeadsWithWholeGroups) {
  std::vector<float> w(64 * 48, 0.1f);
  EXPECT_FALSE(head_sketch_supports(pack_weight(WeightView{w.data(), WType::F32, 64, 48})));  // 48 % 32 != 0
  EXPECT_TRUE(head_sketch_supports(pack_weight(WeightView{w.data(), WType::F32, 48, 64})));
}
