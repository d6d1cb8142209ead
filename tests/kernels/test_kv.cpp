// KV-cache kernels (append at a device-side length, in-place commit of an accepted path) against ATen.
#include <cstring>

#include "kernel_test_util.h"
#include "lookahead/backend/cuda/step_layout.h"
#include "kv_cache.h"

using namespace la_test;
namespace lk = la::kern;

namespace {
lk::DType kdt(at::ScalarType t) {
  return t == at::kFloat ? lk::DType::F32 : t == at::kHalf ? lk::DType::F16 : lk::DType::BF16;
}
}  // namespace

TEST(KvCache, AppendAtDeviceLength) {
  LA_REQUIRE_CUDA();
  for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(name_of(dt));
    const int T = 5, Hkv = 3, D = 16, rows = 12, W = 2 * Hkv * D + Hkv * D;
    // k and v as strided views of a fused [T, W] buffer (as in the forward's qkv).
    const at::Tensor fused = at::randn({T, W}, cuda_opts(dt));
    const at::Tensor k = fused.narrow(1, Hkv * D, Hkv * D).view({T, Hkv, D});
    const at::Tensor v = fused.narrow(1, 2 * Hkv * D, Hkv * D).view({T, Hkv, D});
    for (int L : {0, 4, 9}) {  // 9: the last 2 rows fall past the cache and are skipped
      const at::Tensor kc = at::zeros({rows, Hkv, D}, cuda_opts(dt)), vc = at::zeros({rows, Hkv, D}, cuda_opts(dt));
      const at::Tensor len = at::full({1}, L, cuda_opts(at::kInt));
      ASSERT_EQ(lk::launch_kv_append(kdt(dt), T, Hkv, D, k.data_ptr(), k.stride(0), k.stride(1), v.data_ptr(),
                                     v.stride(0), v.stride(1), kc.data_ptr(), vc.data_ptr(), kc.stride(0),
                                     kc.stride(1), len.data_ptr<int32_t>(), rows, nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const int n = std::min(T, rows - L);
      EXPECT_TRUE(at::equal(kc.narrow(0, L, n), k.narrow(0, 0, n))) << "L=" << L;
      EXPECT_TRUE(at::equal(vc.narrow(0, L, n), v.narrow(0, 0, n))) << "L=" << L;
      EXPECT_EQ(kc.narrow(0, 0, L).abs().sum().item<double>(), 0.0) << "rows before L untouched";
    }
  }
}

TEST(KvCache, CommitGathersPathInPlaceOverAllCaches) {
  LA_REQUIRE_CUDA();
  std::mt19937 rng(3);
  for (auto dt : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(name_of(dt));
    const int layers = 3, rows = 40, Hkv = 2, D = 8, L = 7;
    std::vector<at::Tensor> caches;
    std::vector<int64_t> ptrs;
    for (int i = 0; i < 2 * layers; ++i) {
      caches.push_back(at::randn({rows, Hkv, D}, cuda_opts(dt)));
      ptrs.push_back(reinterpret_cast<int64_t>(caches.back().data_ptr()));
    }
    const at::Tensor table = at::tensor(ptrs, at::TensorOptions().dtype(at::kLong)).to(at::kCUDA);
    for (const std::vector<int32_t>& src : std::vector<std::vector<int32_t>>{{0, 1, 2}, {0, 2, 3, 7}, {1, 2}, {3, 9, 10, 20}}) {
      std::vector<at::Tensor> before;
      for (auto& c : caches) before.push_back(c.clone());
      const at::Tensor s = to_device_i32(src);
      ASSERT_EQ(lk::launch_kv_commit(kdt(dt), 2 * layers, reinterpret_cast<void* const*>(table.data_ptr<int64_t>()),
                                     Hkv * D, L, s.data_ptr<int32_t>(), int(src.size()), nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      for (int i = 0; i < 2 * layers; ++i)
        for (size_t j = 0; j < src.size(); ++j)
          EXPECT_TRUE(at::equal(caches[i][L + j], before[i][L + src[j]])) << "cache " << i << " row " << j;
    }
  }
}
