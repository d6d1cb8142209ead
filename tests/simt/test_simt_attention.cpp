// The step attention kernel (src/backend/cuda/kernels/step_attention.cu{h}, the very sources nvcc compiles) run on the CPU under the
// SIMT emulation (simt.h) against a double-precision reference: tree masks, GQA, the 16- and 64-row tiles, split
// counts with the combine kernel, the device-side cache length, the row tile on an sm_86-sized shared memory, and
// for fp16/bf16 both arithmetic paths (the default scalar one and the WMMA one, StepAttentionArgs::fast_mma).
// Small shapes: the emulation is for correctness, not speed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "lookahead/backend/cuda/step_layout.h"
#include "step_attention.h"
#include "simt.h"
#include "simt_elems.h"

namespace lk = la::kern;

namespace {

using namespace simt_elems;


struct Shape {
  int T, Hq, Hkv, D, L;
  int split_keys = 0;     // 0: the default (512 key positions per split)
  bool device_len = false;
};

// A random tree of T tokens (parents[i] < i, or -1).
std::vector<int32_t> random_parents(int T, std::mt19937& rng) {
  std::vector<int32_t> p(T);
  for (int i = 0; i < T; ++i) p[i] = i == 0 ? -1 : std::uniform_int_distribution<int>(-1, i - 1)(rng);
  return p;
}

template <class E>
double run_case(const Shape& s, uint64_t seed, std::vector<float>* got_out = nullptr, bool fast_mma = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int T = s.T, Hq = s.Hq, Hkv = s.Hkv, D = s.D, L = s.L, G = Hq / Hkv;
  auto fill = [&](size_t n) {
    std::vector<E> v(n);
    for (auto& x : v) x = from_f<E>(u(rng));
    return v;
  };
  // 16-byte aligned buffers: vectors of E are aligned by the allocator (>= 16 on glibc x86-64).
  const int cap = L + 8;
  std::vector<E> q = fill(size_t(T) * Hq * D), kc = fill(size_t(cap) * Hkv * D), vc = fill(size_t(cap) * Hkv * D);
  std::vector<E> kn = fill(size_t(T) * Hkv * D), vn = fill(size_t(T) * Hkv * D), out(size_t(T) * Hq * D);
  const std::vector<int32_t> parents = random_parents(T, rng);
  const std::vector<uint32_t> bits = la::pack_ancestor_bits(parents, T);
  std::vector<unsigned char> ws(lk::step_attention_workspace_bytes(T, Hq, D, 64) + 256);  // 64 splits: plenty
  int32_t len_dev = L;

  lk::StepAttentionArgs a;
  a.dtype = dtype_of<E>();
  a.T = T;
  a.Hq = Hq;
  a.Hkv = Hkv;
  a.D = D;
  a.q = q.data();
  a.q_stride_t = int64_t(Hq) * D;
  a.q_stride_h = D;
  a.k_cache = kc.data();
  a.v_cache = vc.data();
  a.kc_stride_t = a.vc_stride_t = int64_t(Hkv) * D;
  a.kc_stride_h = a.vc_stride_h = D;
  if (s.device_len) {
    a.cache_len_dev = &len_dev;
    a.max_cache_len = cap;
  } else {
    a.cache_len = L;
  }
  a.k_new = kn.data();
  a.v_new = vn.data();
  a.kn_stride_t = a.vn_stride_t = int64_t(Hkv) * D;
  a.kn_stride_h = a.vn_stride_h = D;
  a.anc_bits = bits.data();
  a.out = out.data();
  a.o_stride_t = int64_t(Hq) * D;
  a.o_stride_h = D;
  a.scale = float(1.0 / std::sqrt(double(D)));
  a.workspace = ws.data();
  a.workspace_bytes = ws.size();
  a.split_keys = s.split_keys;
  a.fast_mma = fast_mma;
  EXPECT_EQ(lk::launch_step_attention(a, nullptr), cudaSuccess);
  for (const auto& e : la_simt::take_errors()) ADD_FAILURE() << "emulation: " << e;

  // Reference in double on the same (rounded) inputs.
  double worst = 0;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < Hq; ++h) {
      const int hk = h / G;
      std::vector<double> sc;
      std::vector<const E*> vs;
      auto key = [&](const E* k, const E* v) {
        double d = 0;
        for (int i = 0; i < D; ++i) d += double(to_f(q[(size_t(t) * Hq + h) * D + i])) * to_f(k[i]);
        sc.push_back(d * a.scale);
        vs.push_back(v);
      };
      for (int j = 0; j < L; ++j) key(&kc[(size_t(j) * Hkv + hk) * D], &vc[(size_t(j) * Hkv + hk) * D]);
      for (int j = t; j >= 0; j = parents[j]) key(&kn[(size_t(j) * Hkv + hk) * D], &vn[(size_t(j) * Hkv + hk) * D]);
      double mx = -INFINITY, sum = 0;
      for (double x : sc) mx = std::max(mx, x);
      for (double& x : sc) sum += (x = std::exp(x - mx));
      for (int i = 0; i < D; ++i) {
        double o = 0;
        for (size_t j = 0; j < sc.size(); ++j) o += sc[j] / sum * to_f(vs[j][i]);
        const double g = to_f(out[(size_t(t) * Hq + h) * D + i]);
        if (got_out) got_out->push_back(float(g));
        worst = std::max(worst, std::isnan(g) ? INFINITY : std::fabs(g - o));
      }
    }
  return worst;
}

TEST(Simt, StepAttentionFp32TreeGqaSplits) {
  la_simt::set_device(132, 227 * 1024);
  EXPECT_LT(run_case<float>({5, 4, 2, 64, 37}, 1), 2e-6);             // 16-row tile, one split
  EXPECT_LT(run_case<float>({5, 4, 2, 64, 70, 64}, 2), 2e-6);         // 2 splits of 64 keys: the combine kernel
  EXPECT_LT(run_case<float>({11, 4, 2, 40, 33}, 3), 2e-6);         // rows 22: 64-row tile, D padded to 64
  EXPECT_LT(run_case<float>({3, 2, 2, 16, 0}, 4), 2e-6);              // empty cache
  EXPECT_LT(run_case<float>({6, 4, 1, 64, 45, 64, true}, 5), 2e-6);   // cache length read on the device
  EXPECT_LT(run_case<float>({40, 2, 1, 16, 20, 64}, 14), 2e-6);        // two ancestor words per row
}

// fp16/bf16: the default scalar path (fp32 FMAs on widened inputs, fp32 probabilities) and the WMMA path
// (fast_mma: 16-bit probabilities), each against the reference (tolerances: the output's 16-bit rounding).
TEST(Simt, StepAttentionHalfAndBf16ScalarAndWmma) {
  la_simt::set_device(132, 227 * 1024);
  for (bool mma : {false, true}) {
    SCOPED_TRACE(mma ? "fast_mma (WMMA)" : "default (scalar)");
    EXPECT_LT(run_case<__half>({5, 4, 2, 64, 37}, 6, nullptr, mma), 4e-3);
    EXPECT_LT(run_case<__half>({9, 4, 2, 64, 80, 64}, 7, nullptr, mma), 4e-3);  // rows 18: 64-row tile, 2 splits
    EXPECT_LT(run_case<__nv_bfloat16>({5, 4, 2, 64, 37}, 8, nullptr, mma), 2e-2);
    EXPECT_LT(run_case<__nv_bfloat16>({9, 8, 2, 128, 70, 128, true}, 9, nullptr, mma), 2e-2);
    EXPECT_LT(run_case<__half>({37, 2, 2, 16, 5}, 15, nullptr, mma), 4e-3);  // two ancestor words per row
  }
  // The flag reaches the kernel: WMMA rounds the probabilities to 16 bits, the scalar path keeps them in fp32, so
  // some outputs differ in their last bits.
  std::vector<float> scalar, wmma;
  run_case<__half>({9, 4, 2, 64, 80, 64}, 7, &scalar, false);
  run_case<__half>({9, 4, 2, 64, 80, 64}, 7, &wmma, true);
  EXPECT_NE(scalar, wmma);
}

// On an sm_86/89 part (99 KiB opt-in) the 64-row fp32 and WMMA tiles at D = 128 do not fit: the launcher takes the
// 16-row one (the scalar 16-bit 64-row tile, 86 KiB, fits and is kept).
TEST(Simt, SixtyFourRowTileFallsBackOnSm86) {
  la_simt::set_device(84, 99 * 1024);
  EXPECT_EQ(lk::attn_row_tile(36, 2, 128, 99 * 1024, true), 16);
  EXPECT_EQ(lk::attn_row_tile(36, 4, 128, 99 * 1024, false), 16);
  EXPECT_EQ(lk::attn_row_tile(36, 2, 128, 99 * 1024, false), 64);
  EXPECT_LT(run_case<__nv_bfloat16>({9, 8, 2, 128, 40}, 10, nullptr, true), 2e-2);
  EXPECT_LT(run_case<__nv_bfloat16>({9, 8, 2, 128, 40}, 10), 2e-2);
  EXPECT_LT(run_case<float>({9, 8, 2, 128, 40}, 11), 2e-6);
  la_simt::set_device(132, 227 * 1024);
}

// The split size changes the summation order only: results agree closely for one split and for two.
TEST(Simt, SplitCountsAgree) {
  la_simt::set_device(132, 227 * 1024);
  std::vector<float> one, three;
  run_case<float>({4, 2, 1, 16, 90, 512}, 12, &one);
  run_case<float>({4, 2, 1, 16, 90, 64}, 12, &three);
  ASSERT_EQ(one.size(), three.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(one[i], three[i], 1e-6) << i;
}

}  // namespace
