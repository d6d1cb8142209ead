// Shared helpers of the CUDA kernel tests: device check (tests skip without a GPU), tolerances, references.
#pragma once
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace la_test {

// Empty when a CUDA device is usable, else why not.
inline std::string no_cuda_reason() {
  static const std::string reason = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    if (n == 0) return std::string("no CUDA device");
    return std::string();
  }();
  return reason;
}

#define LA_REQUIRE_CUDA()                                                                            \
  do {                                                                                               \
    const std::string la_reason_ = ::la_test::no_cuda_reason();                                      \
    if (!la_reason_.empty()) GTEST_SKIP() << "no CUDA device, CUDA kernel test skipped (" << la_reason_ << ")"; \
  } while (0)

inline at::TensorOptions cuda_opts(at::ScalarType t) { return at::TensorOptions().dtype(t).device(at::kCUDA, 0); }

inline const char* name_of(at::ScalarType t) {
  return t == at::kFloat ? "f32" : t == at::kHalf ? "f16" : t == at::kBFloat16 ? "bf16" : "?";
}

// max |a - b| / max(max |b|, floor), computed in fp32.
inline double rel_err(const at::Tensor& a, const at::Tensor& b, double floor = 1e-3) {
  const at::Tensor af = a.to(at::kFloat), bf = b.to(at::kFloat);
  const double num = (af - bf).abs().max().item<double>();
  const double den = std::max(bf.abs().max().item<double>(), floor);
  return num / den;
}

// Attention tolerance per input dtype (relative to the output's max magnitude).
inline double attn_tol(at::ScalarType t) { return t == at::kFloat ? 1e-4 : t == at::kHalf ? 1e-2 : 4e-2; }
// Tolerance of element-wise ops that emulate the reference's roundings (a few ulps of the dtype).
inline double ew_tol(at::ScalarType t) { return t == at::kFloat ? 1e-5 : t == at::kHalf ? 2e-3 : 1.6e-2; }

// Random parents: kind 0 = chain (i-1), 1 = tree rooted at 0, 2 = forest (some roots -1).
inline std::vector<int32_t> random_parents(int T, int kind, std::mt19937& rng) {
  std::vector<int32_t> p(T);
  for (int i = 0; i < T; ++i) {
    if (kind == 0 || i == 0) {
      p[i] = i - 1;
    } else if (kind == 1) {
      p[i] = std::uniform_int_distribution<int>(0, i - 1)(rng);
    } else {
      p[i] = std::uniform_int_distribution<int>(-1, i - 1)(rng);
    }
  }
  if (kind == 2 && T > 0) p[0] = -1;
  return p;
}

inline at::Tensor to_device_i32(const std::vector<int32_t>& v) {
  return at::tensor(at::ArrayRef<int32_t>(v), at::TensorOptions().dtype(at::kInt)).to(at::kCUDA);
}

// allowed[i][j]: j is i or an ancestor of i.
inline std::vector<std::vector<bool>> host_ancestors(const std::vector<int32_t>& parents) {
  const int T = int(parents.size());
  std::vector<std::vector<bool>> a(T, std::vector<bool>(T, false));
  for (int i = 0; i < T; ++i)
    for (int j = i; j >= 0; j = parents[j] < j ? parents[j] : -1) a[i][j] = true;
  return a;
}

// fp32 ATen reference of step attention. k_cache/v_cache may be undefined when L == 0.
inline at::Tensor ref_step_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                     int64_t L, const at::Tensor& k_new, const at::Tensor& v_new,
                                     const std::vector<int32_t>& parents, double scale) {
  const int64_t T = q.size(0), Hq = q.size(1), Hkv = k_new.size(1);
  at::Tensor K = k_new.to(at::kFloat), V = v_new.to(at::kFloat);
  if (L > 0) {
    K = at::cat({k_cache.narrow(0, 0, L).to(at::kFloat), K}, 0);
    V = at::cat({v_cache.narrow(0, 0, L).to(at::kFloat), V}, 0);
  }
  K = K.repeat_interleave(Hq / Hkv, 1).permute({1, 0, 2});  // [Hq, L+T, D]
  V = V.repeat_interleave(Hq / Hkv, 1).permute({1, 0, 2});
  const at::Tensor Q = q.to(at::kFloat).permute({1, 0, 2});  // [Hq, T, D]
  std::vector<uint8_t> m(size_t(T) * (L + T), 0);
  const auto anc = host_ancestors(parents);
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j = 0; j < L; ++j) m[i * (L + T) + j] = 1;
    for (int64_t j = 0; j < T; ++j) m[i * (L + T) + L + j] = anc[i][j] ? 1 : 0;
  }
  const at::Tensor mask =
      at::from_blob(m.data(), {T, L + T}, at::TensorOptions().dtype(at::kByte)).to(at::kBool).to(q.device());
  at::Tensor S = at::matmul(Q, K.transpose(1, 2)) * scale;
  S = S.masked_fill(mask.logical_not().unsqueeze(0), -std::numeric_limits<float>::infinity());
  return at::matmul(at::softmax(S, -1), V).permute({1, 0, 2}).contiguous();  // [T, Hq, D]
}

}  // namespace la_test
