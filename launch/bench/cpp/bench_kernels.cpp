// bench_kernels: step attention (la::kern) vs an ATen reference (cat of cache and step K/V + SDPA with a
// boolean tree mask), timed with CUDA events, for T = 1, 2, 4, ..., 256 step tokens at the given contexts.
//
//   bench_kernels [--contexts 256,1024] [--dtype f16|bf16] [--iters 50] [--models tinyllama-1.1b,llama-2-7b]
//
// Prints one table row per (model, context, T): microseconds per call for both, speedup, the kernel's achieved
// K/V read bandwidth and its FLOP rate, and the relative difference of the two outputs. Exit code 77 when
// there is no CUDA device. The kernel runs through the kernel tests' at::Tensor adapter (tests/kernels/cuda_ops.h).
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_ops.h"

namespace {

struct Model {
  std::string name;
  int Hq, Hkv, D;
};

std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_kernels: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Average milliseconds of fn() over iters (after warmup), measured on the default stream.
double time_ms(const std::function<void()>& fn, int iters) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t a, b;
  ck(cudaEventCreate(&a), "event");
  ck(cudaEventCreate(&b), "event");
  ck(cudaEventRecord(a, nullptr), "record");
  for (int i = 0; i < iters; ++i) fn();
  ck(cudaEventRecord(b, nullptr), "record");
  ck(cudaEventSynchronize(b), "sync");
  float ms = 0;
  ck(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return double(ms) / iters;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<int> contexts{256, 1024};
  std::string dtype = "f16";
  int iters = 50;
  std::vector<std::string> model_names{"tinyllama-1.1b", "llama-2-7b"};
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_kernels: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--contexts") {
      contexts.clear();
      for (auto& c : split_csv(val())) contexts.push_back(std::stoi(c));
    } else if (k == "--dtype") {
      dtype = val();
    } else if (k == "--iters") {
      iters = std::stoi(val());
    } else if (k == "--models") {
      model_names = split_csv(val());
    } else {
      std::fprintf(stderr, "usage: bench_kernels [--contexts 256,1024] [--dtype f16|bf16] [--iters N] [--models a,b]\n");
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("bench_kernels: no CUDA device, nothing to benchmark\n");
    return 77;
  }
  const std::vector<Model> known{{"tinyllama-1.1b", 32, 4, 64}, {"llama-2-7b", 32, 32, 128}, {"llama-3-8b", 32, 8, 128}};
  const at::ScalarType st = dtype == "bf16" ? at::kBFloat16 : at::kHalf;
  const auto o = at::TensorOptions().dtype(st).device(at::kCUDA, 0);
  cudaDeviceProp prop{};
  ck(cudaGetDeviceProperties(&prop, 0), "props");
  std::printf("# device: %s (%d SMs), dtype %s, %d iterations per point; one layer's attention per call\n", prop.name,
              prop.multiProcessorCount, dtype.c_str(), iters);
  std::printf("%-16s %6s %5s %6s | %10s %10s %8s | %9s %9s | %9s\n", "model", "ctx", "T", "splits", "ours_us", "aten_us",
              "speedup", "kv_GB/s", "TFLOP/s", "rel_diff");
  std::mt19937 rng(1);
  for (const std::string& mn : model_names) {
    const Model* m = nullptr;
    for (const auto& k : known)
      if (k.name == mn) m = &k;
    if (!m) {
      std::fprintf(stderr, "bench_kernels: unknown model %s\n", mn.c_str());
      return 2;
    }
    for (int L : contexts) {
      for (int T = 1; T <= 256; T *= 2) {
        const at::Tensor q = at::randn({T, m->Hq, m->D}, o);
        const at::Tensor kc = at::randn({L, m->Hkv, m->D}, o), vc = at::randn({L, m->Hkv, m->D}, o);
        const at::Tensor kn = at::randn({T, m->Hkv, m->D}, o), vn = at::randn({T, m->Hkv, m->D}, o);
        std::vector<int32_t> parents(T);  // a random tree (lookahead steps are trees / forests)
        for (int i = 0; i < T; ++i) parents[i] = i == 0 ? -1 : std::uniform_int_distribution<int>(0, i - 1)(rng);
        // The kernel through the tests' adapter (tests/kernels/cuda_ops.h), with its workspace and output
        // allocated once outside the timed loop.
        const at::Tensor bits = la::cuda::ancestor_bits(
            at::from_blob(parents.data(), {T}, at::dtype(at::kInt)).to(o.device()));  // as the CUDA forward packs them
        const at::Tensor out = at::empty({T, m->Hq, m->D}, o);
        const at::Tensor ws = la::cuda::step_attention_workspace(q, L);
        const int splits = la::cuda::step_attention_splits(T, L);
        const double scale = 1.0 / std::sqrt(double(m->D));
        la::cuda::AttentionOptions opt;
        opt.workspace = &ws;
        opt.out = &out;

        // Reference: boolean mask [T, L+T] (cache all visible; step part from the ancestors).
        std::vector<uint8_t> mh(size_t(T) * (L + T), 0);
        for (int i = 0; i < T; ++i) {
          for (int j = 0; j < L; ++j) mh[size_t(i) * (L + T) + j] = 1;
          for (int j = i; j >= 0; j = parents[j]) mh[size_t(i) * (L + T) + L + j] = 1;
        }
        const at::Tensor mask = at::from_blob(mh.data(), {T, L + T}, at::dtype(at::kByte)).to(at::kCUDA).to(at::kBool);
        at::Tensor ref;
        const auto aten_ref = [&] {
          const at::Tensor K = at::cat({kc, kn}, 0).transpose(0, 1).unsqueeze(0);  // [1, Hkv, L+T, D]
          const at::Tensor V = at::cat({vc, vn}, 0).transpose(0, 1).unsqueeze(0);
          ref = at::scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), K, V, mask, 0.0, false, scale,
                                                 /*enable_gqa=*/true)
                    .squeeze(0)
                    .transpose(0, 1);
        };
        const double ours =
            time_ms([&] { la::cuda::step_attention_bits(q, kc, vc, L, kn, vn, bits, scale, opt); }, iters);
        const double aten = time_ms(aten_ref, iters);
        ck(cudaDeviceSynchronize(), "sync");
        const double diff = (out.to(at::kFloat) - ref.to(at::kFloat)).abs().max().item<double>() /
                            std::max(ref.to(at::kFloat).abs().max().item<double>(), 1e-3);
        const double kv_bytes = 2.0 * (L + T) * m->Hkv * m->D * q.element_size();
        const double flops = 4.0 * T * m->Hq * double(L + T) * m->D;
        std::printf("%-16s %6d %5d %6d | %10.1f %10.1f %8.2f | %9.1f %9.2f | %9.2e\n", m->name.c_str(), L, T, splits,
                    ours * 1e3, aten * 1e3, aten / ours, kv_bytes / (ours * 1e-3) / 1e9, flops / (ours * 1e-3) / 1e12,
                    diff);
        std::fflush(stdout);
      }
    }
  }
  return 0;
} catch (const std::exception& e) {  // la::Error from an adapter's check
  std::fprintf(stderr, "bench_kernels: %s\n", e.what());
  return 1;
}
