// The element-wise, KV-cache and argmax kernels (src/backend/cuda/kernels/ops.cu, kv_cache.cu, verify.cu: the very sources nvcc
// compiles) run on the CPU under the SIMT emulation (simt.h) against host references: RMSNorm with the residual
// add (vector and scalar paths), RoPE (HF rotate-half, rounding per op), SwiGLU (fused and split inputs), the KV
// append at a device-side length, the in-place commit of an accepted path over several caches, and the row argmax
// (ties, NaN, vector and scalar paths). Small shapes: the emulation is for correctness, not speed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "kv_cache.h"
#include "ops.h"
#include "simt.h"
#include "simt_elems.h"
#include "verify.h"

namespace lk = la::kern;

namespace {

using namespace simt_elems;

template <class E>
float rnd(float x) { return to_f(from_f<E>(x)); }
// Relative tolerance per element type: a couple of units in the last place of the stored result.
template <class E>
double tol() { return sizeof(E) == 4 ? 2e-6 : std::is_same_v<E, __half> ? 2e-3 : 1.6e-2; }

template <class E>
std::vector<E> random_vec(size_t n, std::mt19937& rng, float lo = -2.f, float hi = 2.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<E> v(n);
  for (auto& x : v) x = from_f<E>(u(rng));
  return v;
}

void no_emulation_errors() {
  for (const auto& e : la_simt::take_errors()) ADD_FAILURE() << "emulation: " << e;
}

template <class E>
void check_close(const std::vector<E>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(to_f(got[i]), want[i], tol<E>() * std::max(1.f, std::fabs(want[i]))) << what << " element " << i;
}

template <class E>
void rms_norm_case(int rows, int H, bool residual, uint64_t seed) {
  std::mt19937 rng(seed);
  const auto x = random_vec<E>(size_t(rows) * H, rng), r = random_vec<E>(size_t(rows) * H, rng);
  const auto w = random_vec<E>(H, rng, 0.5f, 1.5f);
  std::vector<E> out(x.size()), rout(x.size());
  const float eps = 1e-5f;
  ASSERT_EQ(lk::launch_rms_norm(dtype_of<E>(), rows, H, x.data(), H, residual ? r.data() : nullptr, H,
                                residual ? rout.data() : nullptr, H, w.data(), eps, out.data(), H, nullptr),
            cudaSuccess);
  no_emulation_errors();
  std::vector<float> want(x.size()), want_h(x.size());
  for (int i = 0; i < rows; ++i) {
    double ss = 0;
    for (int j = 0; j < H; ++j) {
      const size_t k = size_t(i) * H + j;
      want_h[k] = residual ? rnd<E>(to_f(x[k]) + to_f(r[k])) : to_f(x[k]);
      ss += double(want_h[k]) * want_h[k];
    }
    const float inv = float(1.0 / std::sqrt(ss / H + eps));
    for (int j = 0; j < H; ++j) {
      const size_t k = size_t(i) * H + j;
      want[k] = rnd<E>(to_f(w[j]) * rnd<E>(want_h[k] * inv));
    }
  }
  check_close(out, want, "rms_norm");
  if (residual) {
    for (size_t k = 0; k < x.size(); ++k) ASSERT_EQ(to_f(rout[k]), want_h[k]) << "residual_out " << k;  // exact
  }
}

TEST(SimtOps, RmsNormWithResidual) {
  rms_norm_case<float>(3, 64, true, 1);   // vector path
  rms_norm_case<float>(2, 66, false, 2);  // scalar path (66 % 4)
  rms_norm_case<__half>(3, 128, true, 3);
  rms_norm_case<__nv_bfloat16>(2, 36, true, 4);  // scalar (36 % 8)
}

template <class E>
void rope_case(int T, int Hq, int Hk, int D, float attn_scale, uint64_t seed) {
  std::mt19937 rng(seed);
  auto q = random_vec<E>(size_t(T) * Hq * D, rng), k = random_vec<E>(size_t(T) * Hk * D, rng);
  const auto q0 = q, k0 = k;
  std::vector<int32_t> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = 3 + 7 * t;
  std::vector<float> inv(D / 2);
  for (int i = 0; i < D / 2; ++i) inv[i] = float(std::pow(10000.0, -2.0 * i / D));
  ASSERT_EQ(lk::launch_rope(dtype_of<E>(), T, D, pos.data(), inv.data(), attn_scale, q.data(), Hq, int64_t(Hq) * D, D,
                            Hk ? k.data() : nullptr, Hk, int64_t(Hk) * D, D, nullptr),
            cudaSuccess);
  no_emulation_errors();
  auto ref = [&](const std::vector<E>& x0, int H) {
    std::vector<float> out(x0.size());
    const int half = D / 2;
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < half; ++i) {
          const double a = double(float(pos[t]) * inv[i]);
          const float c = rnd<E>(float(std::cos(a)) * attn_scale), s = rnd<E>(float(std::sin(a)) * attn_scale);
          const size_t b = (size_t(t) * H + h) * D;
          const float x1 = to_f(x0[b + i]), x2 = to_f(x0[b + i + half]);
          out[b + i] = rnd<E>(rnd<E>(x1 * c) + rnd<E>(-x2 * s));
          out[b + i + half] = rnd<E>(rnd<E>(x2 * c) + rnd<E>(x1 * s));
        }
    return out;
  };
  check_close(q, ref(q0, Hq), "rope q");
  check_close(k, ref(k0, Hk), "rope k");
}

TEST(SimtOps, RopeRotateHalf) {
  rope_case<float>(3, 4, 2, 16, 1.f, 5);
  rope_case<__half>(2, 2, 1, 64, 1.f, 6);
  rope_case<__nv_bfloat16>(2, 3, 0, 32, 0.9f, 7);  // no k, scaled cos/sin
}

template <class E>
void swiglu_case(int T, int I, bool fused, uint64_t seed) {
  std::mt19937 rng(seed);
  const auto x = random_vec<E>(size_t(T) * 2 * I, rng, -4.f, 4.f);
  std::vector<E> out(size_t(T) * I);
  const E* g = x.data();
  const E* u = fused ? x.data() + I : x.data() + size_t(T) * I;
  const int64_t st = fused ? 2 * I : I;
  ASSERT_EQ(lk::launch_swiglu(dtype_of<E>(), T, I, g, st, u, st, out.data(), I, nullptr), cudaSuccess);
  no_emulation_errors();
  std::vector<float> want(out.size());
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < I; ++i) {
      const float a = to_f(g[t * st + i]), b = to_f(u[t * st + i]);
      want[size_t(t) * I + i] = rnd<E>(rnd<E>(a / (1.f + std::exp(-a))) * b);
    }
  check_close(out, want, "swiglu");
}

TEST(SimtOps, SwiGlu) {
  swiglu_case<float>(3, 64, true, 8);
  swiglu_case<__half>(2, 72, false, 9);
  swiglu_case<__nv_bfloat16>(2, 30, true, 10);  // scalar path
}

TEST(SimtKv, AppendAtDeviceLengthAndCommitPath) {
  std::mt19937 rng(11);
  const int T = 5, Hkv = 2, D = 8, rows = 12, row = Hkv * D;
  for (lk::DType dt : {lk::DType::F32, lk::DType::BF16}) {
    const size_t es = dt == lk::DType::F32 ? 4 : 2;
    std::vector<unsigned char> kn(T * row * es), vn(T * row * es), kc(rows * row * es), vc(rows * row * es);
    for (auto* v : {&kn, &vn, &kc, &vc})
      for (auto& b : *v) b = static_cast<unsigned char>(rng());
    for (int len : {0, 4, 9}) {  // 9: rows 12.. are past the cache and skipped
      auto kc1 = kc, vc1 = vc;
      int32_t len_dev = len;
      ASSERT_EQ(lk::launch_kv_append(dt, T, Hkv, D, kn.data(), row, D, vn.data(), row, D, kc1.data(), vc1.data(), row,
                                     D, &len_dev, rows, nullptr),
                cudaSuccess);
      no_emulation_errors();
      for (int r = 0; r < rows; ++r) {
        const bool fresh = r >= len && r < len + T;
        const auto* wk = fresh ? &kn[(r - len) * row * es] : &kc[r * row * es];
        const auto* wv = fresh ? &vn[(r - len) * row * es] : &vc[r * row * es];
        EXPECT_EQ(std::memcmp(&kc1[r * row * es], wk, row * es), 0) << "len " << len << " K row " << r;
        EXPECT_EQ(std::memcmp(&vc1[r * row * es], wv, row * es), 0) << "len " << len << " V row " << r;
      }
    }
    // Commit rows len + src[j] -> len + j in three caches, one launch.
    std::vector<std::vector<unsigned char>> caches(3, std::vector<unsigned char>(rows * row * es));
    for (auto& c : caches)
      for (auto& b : c) b = static_cast<unsigned char>(rng());
    const auto before = caches;
    std::vector<void*> table;
    for (auto& c : caches) table.push_back(c.data());
    const int len = 2;
    const std::vector<int32_t> src = {0, 2, 3, 7};
    ASSERT_EQ(lk::launch_kv_commit(dt, 3, table.data(), row, len, src.data(), int(src.size()), nullptr), cudaSuccess);
    no_emulation_errors();
    for (int c = 0; c < 3; ++c)
      for (int r = 0; r < rows; ++r) {
        const int from = r >= len && r < len + int(src.size()) ? len + src[r - len] : r;
        EXPECT_EQ(std::memcmp(&caches[c][r * row * es], &before[c][from * row * es], row * es), 0)
            << "cache " << c << " row " << r;
      }
  }
}

template <class E>
void argmax_case(int rows, int V, uint64_t seed) {
  std::mt19937 rng(seed);
  auto l = random_vec<E>(size_t(rows) * V, rng, -3.f, 3.f);
  // Row 0: a tie between two maxima (the first wins); row 1: a NaN (counts as the maximum); row 2: all equal.
  l[5] = l[V - 2] = from_f<E>(10.f);
  if (rows > 1) {
    l[V + 3] = from_f<E>(20.f);
    l[V + V / 2] = from_f<E>(NAN);
  }
  if (rows > 2)
    for (int v = 0; v < V; ++v) l[2 * V + v] = from_f<E>(1.f);
  std::vector<int32_t> out(rows, -7);
  ASSERT_EQ(lk::launch_argmax_rows(dtype_of<E>(), rows, V, l.data(), V, out.data(), nullptr), cudaSuccess);
  no_emulation_errors();
  for (int r = 0; r < rows; ++r) {
    int best = 0;
    for (int v = 1; v < V; ++v) {
      const float a = to_f(l[size_t(r) * V + v]), b = to_f(l[size_t(r) * V + best]);
      if (std::isnan(b)) break;
      if (std::isnan(a) || a > b) best = v;
    }
    EXPECT_EQ(out[r], best) << "row " << r;
  }
  EXPECT_EQ(out[0], 5);
}

TEST(SimtVerify, ArgmaxRowsTiesAndNan) {
  argmax_case<float>(4, 1000, 12);         // vector path
  argmax_case<__half>(3, 1001, 13);        // scalar path
  argmax_case<__nv_bfloat16>(3, 4096, 14);
}

}  // namespace
