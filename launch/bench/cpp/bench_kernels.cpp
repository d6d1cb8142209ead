// bench_kernels: step attention (la::kern) vs an ATen reference (cat of cache and step K/V + SDPA with a
// boolean tree mask), timed with CUDA events, for T = 1, 2, 4, ..., 256 step tokens at the given contexts.
//
//   bench_kernels [--contexts 256,1024] [--dtype f16|bf16] [--iters 50] [--models tinyllama-1.1b,llama-2-7b]
//
// Prints one table row per (model, context, T): microseconds per call for both, speedup, the kernel's achieved
// K/V read bandwidth and its FLOP rate, and the relative difference of the two outputs. Exit code 77 when
// there is no CUDA device.
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

#include "lookahead/backend/cuda/step_layout.h"
#include "step_attention.h"

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

int main(int argc, char** argv) {
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
  const la::kern::DType kdt = dtype == "bf16" ? la::kern::DType::BF16 : la::kern::DType::F16;
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
        const std::vector<uint32_t> hb = la::pack_ancestor_bits(parents, T);  // as the CUDA forward uploads them
        const at::Tensor bits =
            at::from_blob(const_cast<uint32_t*>(hb.data()), {T, la::kern::ancestor_words(T)}, at::dtype(at::kInt))
                .to(o.device());
        const at::Tensor out = at::empty({T, m->Hq, m->D}, o);
        const double scale = 1.0 / std::sqrt(double(m->D));

        la::kern::StepAttentionArgs a;
        a.dtype = kdt;
        a.T = T;
        a.Hq = m->Hq;
        a.Hkv = m->Hkv;
        a.D = m->D;
        a.q = q.data_ptr();
        a.q_stride_t = q.stride(0);
        a.q_stride_h = q.stride(1);
        a.k_cache = kc.data_ptr();
        a.kc_stride_t = kc.stride(0);
        a.kc_stride_h = kc.stride(1);
        a.v_cache = vc.data_ptr();
        a.vc_stride_t = vc.stride(0);
        a.vc_stride_h = vc.stride(1);
        a.cache_len = L;
        a.k_new = kn.data_ptr();
        a.kn_stride_t = kn.stride(0);
        a.kn_stride_h = kn.stride(1);
        a.v_new = vn.data_ptr();
        a.vn_stride_t = vn.stride(0);
        a.vn_stride_h = vn.stride(1);
        a.anc_bits = reinterpret_cast<const uint32_t*>(bits.data_ptr<int32_t>());
        a.out = out.data_ptr();
        a.o_stride_t = out.stride(0);
        a.o_stride_h = out.stride(1);
        a.scale = float(scale);
        a.workspace_bytes = size_t(-1);
        const int splits = la::kern::step_attention_splits(a);
        const at::Tensor ws =
            at::empty({int64_t(la::kern::step_attention_workspace_bytes(T, m->Hq, m->D, splits)) + 16}, o.dtype(at::kByte));
        a.workspace = ws.data_ptr();
        a.workspace_bytes = size_t(ws.numel());

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
        const double ours = time_ms([&] { ck(la::kern::launch_step_attention(a, nullptr), "step attention"); }, iters);
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
}
