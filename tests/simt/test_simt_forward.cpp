// The CUDA forward's step program (src/backend/cuda/cuda_step.cpp, the very file CudaForward runs on a GPU) executed on
// the CPU under the SIMT emulation, against the ATen forward (TorchLlama, --kernels off) on the same weights:
// random tree steps padded to their bucket (1 .. 256) as CudaForward::run pads them, a commit of a root-to-node
// path that is not a prefix through launch_kv_commit after each step, and the cache length read on the "device"
// from the step buffer growing across steps. The GEMMs go through a host StepLinear (fp32 loop in a fixed order):
// cuBLAS and CUDA graphs do not run here (the start-up self-check covers them on a GPU, docs/gpu.md). The batched
// step program (enqueue_batch_step: several slots, each its own cache) is checked against each slot's own step.
//
// Only la's public, ATen-free headers: the ATen forward is reached through the StepModel API (load_llama), so the
// SIMT stand-in CUDA headers never meet c10's in one translation unit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_step.h"
#include "gemm_rows.h"
#include "kv_cache.h"
#include "lookahead/engine/llama.h"
#include "lookahead/model/safetensors.h"
#include "lookahead/backend/cuda/step_layout.h"
#include "ops.h"
#include "simt.h"
#include "simt_elems.h"
#include "step_attention.h"

namespace {

using namespace la;
using simt_elems::from_f;
using simt_elems::to_f;

// "Device" memory: host memory, 256-byte aligned (cp.async and WMMA pointers), zeroed.
struct Buf {
  std::shared_ptr<void> p;
  explicit Buf(size_t bytes) {
    bytes = (bytes + 255) / 256 * 256 + 256;
    p.reset(std::aligned_alloc(256, bytes), std::free);
    std::memset(p.get(), 0, bytes);
  }
  void* get() const { return p.get(); }
};

template <class E>
Buf upload(const std::vector<float>& v) {
  Buf b(v.size() * sizeof(E));
  E* e = static_cast<E*>(b.get());
  for (size_t i = 0; i < v.size(); ++i) e[i] = from_f<E>(v[i]);
  return b;
}

std::vector<float> f32_of(const SafetensorsCheckpoint& ck, const std::string& name) {
  const TensorView& t = ck.get(name);
  if (t.dtype != la::DType::F32) throw std::runtime_error(name + " is not F32");
  const float* p = static_cast<const float*>(t.data);
  return std::vector<float>(p, p + t.numel());
}
std::vector<float> cat(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The GEMM contract of kern::LinearArgs on the host: fp32 products summed in k order, bias added, one rounding. A
// bias is broadcast into y by the same kernel as production's cuBLAS path (launch_broadcast_row) and added as
// cuBLAS's beta = 1 adds C, so that kernel runs here too.
template <class E>
struct HostLinear final : StepLinear {
  int calls = 0;
  cudaError_t linear(const kern::LinearArgs& a, cudaStream_t s) override {
    ++calls;
    const E* x = static_cast<const E*>(a.x);
    const E* w = static_cast<const E*>(a.w);
    E* y = static_cast<E*>(a.y);
    const E* b = a.bias ? y : nullptr;  // row m's bias: y[m][n] after the broadcast
    if (a.bias) {
      const cudaError_t e = kern::launch_broadcast_row(a.dt, a.M, a.N, a.bias, a.y, a.ldy, s);
      if (e != cudaSuccess) return e;
    }
    std::vector<float> xr(a.K);
    for (int m = 0; m < a.M; ++m) {
      for (int k = 0; k < a.K; ++k) xr[k] = to_f(x[m * a.ldx + k]);
      for (int n = 0; n < a.N; ++n) {
        const E* wr = w + n * a.ldw;
        float acc = 0.f;
        for (int k = 0; k < a.K; ++k) acc += xr[k] * to_f(wr[k]);
        if (b) acc += to_f(b[m * a.ldy + n]);
        y[m * a.ldy + n] = from_f<E>(acc);
      }
    }
    return cudaSuccess;
  }
};

// The fixed-configuration GEMM kernel (src/backend/cuda/kernels/gemm_rows.cu) as the step program's GEMM, as a GPU would run it once
// it is wired into CudaForward: every output element reduced over k in one order whatever M.
struct FixedLinear final : StepLinear {
  int calls = 0;
  cudaError_t linear(const kern::LinearArgs& a, cudaStream_t s) override {
    ++calls;
    return kern::launch_linear_fixed(a, s);
  }
};

// A GEMM whose summation order depends on M, as cuBLAS's may (the negative control of the invariance test): k in
// reverse order for steps of more than 8 rows.
struct MDependentLinear final : StepLinear {
  int calls = 0;
  cudaError_t linear(const kern::LinearArgs& a, cudaStream_t) override {
    ++calls;
    const float* x = static_cast<const float*>(a.x);
    const float* w = static_cast<const float*>(a.w);
    const float* b = static_cast<const float*>(a.bias);
    float* y = static_cast<float*>(a.y);
    for (int m = 0; m < a.M; ++m)
      for (int n = 0; n < a.N; ++n) {
        float acc = 0.f;
        for (int i = 0; i < a.K; ++i) {
          const int k = a.M > 8 ? a.K - 1 - i : i;
          acc += x[m * a.ldx + k] * w[n * a.ldw + k];
        }
        y[m * a.ldy + n] = acc + (b ? b[n] : 0.f);
      }
    return cudaSuccess;
  }
};

// The step program's world for one model: weights, buffers and caches in "device" memory.
template <class E>
struct Device {
  StepDims d;
  StepWeights w;
  StepBuffers b;
  StepCaches c;
  std::vector<Buf> keep;
  Buf step{0}, table{0}, commit_src{0};
  HostLinear<E> host;
  StepLinear* lin = &host;  // the GEMM the steps use

  // mutate_norm: the mutation check's wrong index (every layer's ln2 replaced by its ln1).
  Device(const ModelConfig& cfg, const SafetensorsCheckpoint& ck, int cache_rows, bool mutate_norm = false) {
    d.dt = simt_elems::dtype_of<E>();
    d.H = cfg.hidden;
    d.Hq = cfg.heads;
    d.Hkv = cfg.kv_heads;
    d.D = cfg.head_dim;
    d.I = cfg.intermediate;
    d.V = cfg.vocab;
    d.layers = cfg.layers;
    d.eps = float(cfg.rms_eps);
    const int R = 256;
    d.split_keys = kern::attn_split_keys(int64_t(cfg.max_positions) + 256 + R);  // as CudaForward
    auto put = [&](const std::vector<float>& v) {
      keep.push_back(upload<E>(v));
      return static_cast<const void*>(keep.back().get());
    };
    const std::vector<float> embed = f32_of(ck, "model.embed_tokens.weight");
    w.embed = put(embed);
    w.norm = put(f32_of(ck, "model.norm.weight"));
    w.lm_head = ck.has("lm_head.weight") ? put(f32_of(ck, "lm_head.weight")) : w.embed;
    std::vector<float> inv(d.D / 2);  // as make_rope_tables (plain RoPE: the models here have no rope scaling)
    for (int i = 0; i < d.D / 2; ++i) inv[i] = float(1.0 / std::pow(cfg.rope_theta, (2.0 * i) / d.D));
    keep.push_back(upload<float>(inv));
    w.inv_freq = static_cast<const float*>(keep.back().get());
    for (int l = 0; l < d.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      StepLayerWeights lw;
      lw.ln1 = put(f32_of(ck, p + "input_layernorm.weight"));
      lw.wqkv = put(cat(cat(f32_of(ck, p + "self_attn.q_proj.weight"), f32_of(ck, p + "self_attn.k_proj.weight")),
                        f32_of(ck, p + "self_attn.v_proj.weight")));
      if (cfg.attention_bias)
        lw.bqkv = put(cat(cat(f32_of(ck, p + "self_attn.q_proj.bias"), f32_of(ck, p + "self_attn.k_proj.bias")),
                          f32_of(ck, p + "self_attn.v_proj.bias")));
      lw.wo = put(f32_of(ck, p + "self_attn.o_proj.weight"));
      if (ck.has(p + "self_attn.o_proj.bias")) lw.bo = put(f32_of(ck, p + "self_attn.o_proj.bias"));
      lw.ln2 = mutate_norm ? lw.ln1 : put(f32_of(ck, p + "post_attention_layernorm.weight"));
      lw.wgu = put(cat(f32_of(ck, p + "mlp.gate_proj.weight"), f32_of(ck, p + "mlp.up_proj.weight")));
      lw.wd = put(f32_of(ck, p + "mlp.down_proj.weight"));
      w.layers.push_back(lw);
    }
    auto alloc = [&](size_t elems, size_t es = sizeof(E)) {
      keep.emplace_back(elems * es);
      return keep.back().get();
    };
    b.rows = R;
    b.x = alloc(size_t(R) * d.H);
    b.h = alloc(size_t(R) * d.H);
    b.a = alloc(size_t(R) * d.H);
    b.qkv = alloc(size_t(R) * d.W());
    b.attn = alloc(size_t(R) * d.Q());
    b.gu = alloc(size_t(R) * 2 * d.I);
    b.act = alloc(size_t(R) * d.I);
    b.logits = alloc(size_t(R) * d.V);
    b.argmax = static_cast<int32_t*>(alloc(R, 4));
    step = Buf(size_t(padded_step_layout(R).words) * 4);
    b.step = static_cast<const int32_t*>(step.get());
    b.workspace_bytes = kern::step_attention_workspace_bytes(R, d.Hq, d.D, 16) + 256;
    b.workspace = alloc(b.workspace_bytes, 1);
    c.rows = cache_rows;
    table = Buf(size_t(2 * d.layers) * sizeof(void*));
    void** tab = static_cast<void**>(table.get());
    for (int l = 0; l < d.layers; ++l) {
      c.k.push_back(alloc(size_t(cache_rows) * d.KV()));
      c.v.push_back(alloc(size_t(cache_rows) * d.KV()));
      tab[2 * l] = c.k.back();
      tab[2 * l + 1] = c.v.back();
    }
    commit_src = Buf(size_t(R) * 4);
  }

  // As CudaForward::run: pad to the bucket, fill the step words (cache length included), run the step program.
  // logits/am: rows first .. T-1 (the step's output rows), one after another.
  void run(const StepInput& in, int L, std::vector<float>& logits, std::vector<int32_t>& am, int first = 0) {
    const int T = int(in.tokens.size());
    const int R = step_bucket(T);
    ASSERT_GT(R, 0);
    ASSERT_LE(L + R, c.rows);
    PaddedStepLayout lay = padded_step_layout(R);
    int32_t* words = static_cast<int32_t*>(step.get());
    fill_padded_step(in.tokens, in.positions, in.parents, L, first, lay, words);
    ASSERT_EQ(words[lay.cache_len], L);  // the device-side cache length the KV append and the attention read
    const StepStatus st = enqueue_step(d, w, b, c, lay, *lin, nullptr);
    ASSERT_TRUE(st.ok()) << st.what;
    const auto errs = la_simt::take_errors();
    ASSERT_TRUE(errs.empty()) << errs.front();
    logits.resize(size_t(T - first) * d.V);
    const E* lg = static_cast<const E*>(b.logits);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = to_f(lg[i]);
    am.assign(b.argmax, b.argmax + (T - first));
  }
  // As CudaForward::commit: rows L + idx[j] -> L + j of every layer's K and V.
  void commit(const std::vector<int32_t>& idx, int L) {
    std::copy(idx.begin(), idx.end(), static_cast<int32_t*>(commit_src.get()));
    ASSERT_EQ(kern::launch_kv_commit(d.dt, 2 * d.layers, static_cast<void* const*>(table.get()), d.KV(), L,
                                     static_cast<const int32_t*>(commit_src.get()), int(idx.size()), nullptr),
              cudaSuccess);
  }
};

// A random tree of T tokens after a cache of L: parents uniform in [-1, i) (several roots), positions L + depth.
StepInput random_tree(std::mt19937& rng, int T, int L, int vocab) {
  StepInput s;
  std::vector<int> depth(T);
  for (int i = 0; i < T; ++i) {
    const int p = i == 0 ? -1 : int(rng() % (i + 1)) - 1;
    depth[i] = p < 0 ? 0 : depth[p] + 1;
    s.tokens.push_back(int32_t(rng() % vocab));
    s.parents.push_back(p);
    s.positions.push_back(L + depth[i]);
  }
  return s;
}
// The root-to-node path of the deepest node (the last one on ties): indices into the step, increasing.
std::vector<int32_t> deepest_path(const StepInput& s) {
  int best = 0, bd = -1;
  for (int i = 0; i < int(s.tokens.size()); ++i)
    if (s.positions[i] >= bd) bd = s.positions[i], best = i;
  std::vector<int32_t> path;
  for (int i = best; i >= 0; i = s.parents[i]) path.push_back(i);
  std::reverse(path.begin(), path.end());
  return path;
}

struct Tolerance {
  double logits;  // |kernel - ATen| <= logits * (1 + max |ATen logit| of the row)
  bool argmax_exact;
};

// The ATen forward on the CPU (one thread, no self-check): the reference of every comparison here.
std::unique_ptr<StepModel> load_reference(const std::string& dir, const std::string& dtype) {
  LoadOptions o;
  o.model = dir;
  o.dtype = dtype;
  o.device = "cpu";
  o.kernels = "off";
  o.selfcheck = "off";
  o.threads = 1;
  return load_llama(o);
}

// One row of reference logits: its largest magnitude and its top two values.
struct RefRow {
  double max_abs = 0;
  float top = -INFINITY, second = -INFINITY;
};
RefRow ref_row(const float* r, int V) {
  RefRow row;
  for (int v = 0; v < V; ++v) {
    row.max_abs = std::max(row.max_abs, double(std::fabs(r[v])));
    if (r[v] > row.top) row.second = row.top, row.top = r[v];
    else if (r[v] > row.second) row.second = r[v];
  }
  return row;
}
// The argmax must agree exactly in fp32; in 16-bit wherever the reference's top-2 margin exceeds the tolerance (a
// closer pair may flip under a different rounding order).
bool argmax_must_agree(const RefRow& row, Tolerance tol) {
  return tol.argmax_exact || double(row.top - row.second) > 2 * tol.logits * (1 + row.max_abs);
}

// Steps of the given sizes (each a random tree, its deepest path committed on both sides), then a chain of 3
// decoding steps; every step compared with the ATen forward. Returns the largest relative logit difference seen.
template <class E>
double compare(const std::string& dir, const std::string& dtype, const std::vector<int>& sizes, Tolerance tol,
               bool mutate = false, bool* mismatch = nullptr, StepLinear* gemm = nullptr) {
  std::unique_ptr<StepModel> ref = load_reference(dir, dtype);
  const ModelConfig& cfg = ref->config();
  const SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(dir);
  Device<E> dev(cfg, ck, 384, mutate);
  if (gemm) dev.lin = gemm;
  std::mt19937 rng(1234);
  int L = 0, non_prefix = 0;
  double worst = 0;
  bool bad = false;
  std::vector<float> lk, lr;
  std::vector<int32_t> ak;
  auto check = [&](const StepInput& in, const char* what) {
    const int T = int(in.tokens.size());
    const std::vector<int32_t> ar = ref->forward(in, SampleParams{}, &lr);
    const auto t0 = std::chrono::steady_clock::now();
    dev.run(in, L, lk, ak);
    if (getenv("LA_SIMT_TIMES"))  // per-step emulation time, for choosing the step sizes below
      std::printf("T=%d %.2f s\n", T, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    const int V = cfg.vocab;
    for (int t = 0; t < T; ++t) {
      const RefRow row = ref_row(&lr[size_t(t) * V], V);
      const double mx = row.max_abs;
      double diff = 0;
      for (int v = 0; v < V; ++v)
        diff = std::max(diff, double(std::fabs(lk[size_t(t) * V + v] - lr[size_t(t) * V + v])));
      const double rel = diff / (1 + mx);
      worst = std::max(worst, rel);
      if (rel > tol.logits || (argmax_must_agree(row, tol) && ak[t] != ar[t])) {
        bad = true;
        if (!mutate)
          ADD_FAILURE() << what << " T=" << T << " L=" << L << " token " << t << ": argmax " << ak[t] << " vs ATen "
                        << ar[t] << ", max |diff| " << diff << " (max |logit| " << mx << ")";
        break;
      }
    }
  };
  // A prefill chain of 5 (bucket 8), all committed (the identity commit), then the trees.
  const StepInput pre = StepInput::chain({1, 5, 9, 13, 17}, 0);
  check(pre, "prefill");
  ref->commit({0, 1, 2, 3, 4});
  dev.commit({0, 1, 2, 3, 4}, L);
  L += 5;
  for (int T : sizes) {
    const StepInput in = random_tree(rng, T, L, cfg.vocab);
    check(in, "tree");
    const std::vector<int32_t> path = deepest_path(in);
    for (int j = 0; j < int(path.size()); ++j)
      if (path[j] != j) {
        ++non_prefix;
        break;
      }
    ref->commit(path);
    dev.commit(path, L);
    L += int(path.size());
    EXPECT_EQ(ref->cache_len(), L);
  }
  for (int i = 0; i < 3; ++i) {  // plain decoding on the committed cache
    const StepInput in = StepInput::chain({int32_t(ak[0])}, L);
    check(in, "decode");
    ref->commit({0});
    dev.commit({0}, L);
    L += 1;
  }
  if (!mutate) {
    EXPECT_GT(non_prefix, 0) << "no commit of a non-prefix path";
  }
  if (!gemm) {
    EXPECT_GT(dev.host.calls, 0);
  }
  if (mismatch) *mismatch = bad;
  return worst;
}

// A directory of this process's, removed at exit.
std::string tmp_dir() {
  static std::string d;
  d = (std::filesystem::temp_directory_path() / ("la_simt_forward_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(d);
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  });
  return d;
}

// A random GQA model with q/k/v biases (tiny-gqa-bias: hidden 64, 8 heads of 8, 2 KV heads, 3 layers, vocab 320),
// saved as a Hugging Face directory so both sides read the very same fp32 weights.
const std::string& random_model_dir() {
  static const std::string dir = [] {
    const std::string d = tmp_dir();
    LoadOptions o;
    o.model = "random:tiny-gqa-bias:11";
    o.selfcheck = "off";
    o.threads = 1;
    std::unique_ptr<StepModel> m = load_llama(o);
    save_hf_directory(*m, d);
    return d;
  }();
  return dir;
}

// Step sizes: a random tree of each, padded to its bucket (the emulation's cost grows with the square of the
// bucket: bucket 256 is about two thirds of a test's time).
const std::vector<int> kAllBuckets{1, 3, 12, 20, 40, 100, 200};  // buckets 1, 8, 16, 32, 64, 128, 256
constexpr double kTolF32 = 1e-4, kTolBf16 = 3e-2;

struct Timer {
  const char* name;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~Timer() {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ %s: %.1f s ]\n", name, s);
  }
};

// compare() over every bucket, timed, printing the largest relative difference under `name`.
template <class E>
void compare_all_buckets(const char* name, const std::string& dir, const std::string& dtype, Tolerance tol,
                         StepLinear* gemm = nullptr) {
  Timer tm{name};
  const double worst = compare<E>(dir, dtype, kAllBuckets, tol, false, nullptr, gemm);
  std::printf("%s: max |diff| / (1 + max |logit|) = %.3g\n", name, worst);
}

TEST(SimtForward, RandomGqaBiasFp32TreeStepsAllBuckets) {
  compare_all_buckets<float>("random fp32", random_model_dir(), "fp32", {kTolF32, true});
}

TEST(SimtForward, Stories260kFp32TreeStepsAllBuckets) {
  const std::string dir = std::string(LA_SHARED_DIR) + "/models/stories260K";
  if (!std::filesystem::exists(dir + "/model.safetensors")) GTEST_SKIP() << dir << " is missing";
  compare_all_buckets<float>("stories260K fp32", dir, "fp32", {kTolF32, true});
}

TEST(SimtForward, RandomGqaBiasBf16TreeStepsAllBuckets) {
  compare_all_buckets<__nv_bfloat16>("random bf16", random_model_dir(), "bf16", {kTolBf16, false});
}

// The same with the fixed-configuration GEMM kernel as the step program's GEMM (src/backend/cuda/kernels/gemm_rows.cu under the
// emulation): the whole GPU step with no cuBLAS left, against the ATen forward.
TEST(SimtForward, RandomGqaBiasFp32FixedGemmAllBuckets) {
  FixedLinear fixed;
  compare_all_buckets<float>("random fp32, fixed GEMM", random_model_dir(), "fp32", {kTolF32, true}, &fixed);
  EXPECT_GT(fixed.calls, 0);
}

// Batch invariance of the whole fp32 step program with the fixed GEMM: a chain of three tokens gives the same logit
// bits alone (bucket 8) and as the first chain of trees of 40 and 200 tokens (buckets 64 and 256), the attention
// splits being fixed by absolute position (src/backend/cuda/kernels/step_attention_plan.h) and every other kernel and the GEMM
// computing a row from that row alone. The negative control: a GEMM whose k order depends on M breaks it.
std::vector<std::vector<float>> first_chain_logits(const std::string& dir, StepLinear& gemm) {
  const ModelConfig cfg = model_config_of(dir);
  const SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(dir);
  Device<float> dev(cfg, ck, 384);
  dev.lin = &gemm;
  std::vector<float> lg;
  std::vector<int32_t> am;
  // A cache of 70 rows: more than the narrowest split (64 keys), so a split layout that followed the bucket would
  // regroup the chain's keys.
  const int L = 70;
  std::vector<int32_t> pre(L), idx(L);
  for (int i = 0; i < L; ++i) pre[i] = (7 * i + 1) % cfg.vocab, idx[i] = i;
  dev.run(StepInput::chain(pre, 0), 0, lg, am);
  dev.commit(idx, 0);
  std::mt19937 rng(99);
  std::vector<std::vector<float>> out;
  for (int T : {3, 40, 200}) {
    StepInput in = random_tree(rng, T, L, cfg.vocab);
    const int32_t chain[3] = {7, 3, 11};
    for (int i = 0; i < 3; ++i) {
      in.tokens[i] = chain[i];
      in.parents[i] = i - 1;
      in.positions[i] = L + i;
    }
    for (int i = 3; i < T; ++i) in.positions[i] = in.parents[i] < 0 ? L : in.positions[in.parents[i]] + 1;
    dev.run(in, L, lg, am);
    out.emplace_back(lg.begin(), lg.begin() + 3 * cfg.vocab);
  }
  return out;
}

TEST(SimtForward, Fp32StepIsBatchInvariantWithFixedGemm) {
  Timer tm{"batch invariance"};
  FixedLinear fixed;
  const auto lg = first_chain_logits(random_model_dir(), fixed);
  for (size_t i = 1; i < lg.size(); ++i)
    EXPECT_EQ(std::memcmp(lg[0].data(), lg[i].data(), lg[0].size() * sizeof(float)), 0) << "step " << i;
  MDependentLinear mdep;
  const auto bad = first_chain_logits(random_model_dir(), mdep);
  EXPECT_NE(std::memcmp(bad[0].data(), bad[1].data(), bad[0].size() * sizeof(float)), 0)
      << "an M-dependent GEMM should change the bits";
}

// Output rows only (StepInput::first_output, step_layout.h): a tree step of 40 tokens (bucket 64) with the LM head
// on its last row (a prompt chunk's), on rows 20..39 (bucket 32 of gathered rows) and on none gives those rows'
// logits and argmax bit for bit as the step with every row's (fixed GEMM: the LM head's row count changes no bits),
// and writes the same K/V (a step after each reads the same logits).
TEST(SimtForward, OutputRowsOnlyAreTheFullStepsRows) {
  Timer tm{"output rows"};
  const std::string dir = random_model_dir();
  const ModelConfig cfg = model_config_of(dir);
  const SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(dir);
  Device<float> dev(cfg, ck, 384);
  FixedLinear fixed;
  dev.lin = &fixed;
  const int L = 70, T = 40, V = cfg.vocab;
  std::vector<int32_t> pre(L), idx(L);
  for (int i = 0; i < L; ++i) pre[i] = (3 * i + 2) % V, idx[i] = i;
  std::vector<float> lg, full, next_full, next;
  std::vector<int32_t> am, full_am;
  dev.run(StepInput::chain(pre, 0), 0, lg, am);
  dev.commit(idx, 0);
  std::mt19937 rng(7);
  const StepInput in = random_tree(rng, T, L, V);
  // The next step reads the step's K/V: commit its root and run one token after it.
  const StepInput after = StepInput::chain({5}, L + 1);
  dev.run(in, L, full, full_am);
  dev.commit({0}, L);
  dev.run(after, L + 1, next_full, am);
  for (int first : {T - 1, 20, T}) {
    dev.run(in, L, lg, am, first);
    const size_t n = size_t(T - first);
    ASSERT_EQ(lg.size(), n * V);
    EXPECT_EQ(std::memcmp(lg.data(), full.data() + size_t(first) * V, n * V * sizeof(float)), 0)
        << "first output " << first << ": logits differ from the full step's rows";
    EXPECT_EQ(am, std::vector<int32_t>(full_am.begin() + first, full_am.end())) << "first output " << first;
    dev.commit({0}, L);
    dev.run(after, L + 1, next, am);
    EXPECT_EQ(std::memcmp(next.data(), next_full.data(), next.size() * sizeof(float)), 0)
        << "first output " << first << ": the K/V it wrote differ";
  }
}

// A batched step of the step program (enqueue_batch_step: several slots, each its own cache, in one pass) against
// each slot's single-slot step (enqueue_step): 3 slots with different cache lengths (5, 70, 23; splits of 64 keys,
// so slot 1's keys span two splits) and step shapes (a tree, a decoding chain of 1, another tree), then, after
// each slot commits a non-prefix path, three more batched steps of other shapes, two of them with output rows only
// on some rows (StepInput::first_output: the LM head on the gathered output rows, or on none). Every slot's output
// rows must be the same logit bits (memcmp) as in its single-slot step and its ids those of the ATen forward on its
// own cache (exactly in fp32; in 16-bit where the reference's top-2 margin exceeds the tolerance, as compare() does).
template <class E>
void batched_step_matches_single(const std::string& dtype, double tol, bool argmax_exact, StepLinear* gemm) {
  const std::string dir = random_model_dir();
  const ModelConfig cfg = model_config_of(dir);
  const SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(dir);
  constexpr int kSlots = 3, kCacheRows = 384;
  const int lens[kSlots] = {5, 70, 23};
  std::vector<std::unique_ptr<Device<E>>> dev;
  std::vector<std::unique_ptr<StepModel>> ref;
  ref.push_back(load_reference(dir, dtype));
  std::vector<float> lg;
  std::vector<int32_t> am;
  for (int i = 0; i < kSlots; ++i) {
    dev.push_back(std::make_unique<Device<E>>(cfg, ck, kCacheRows));
    if (gemm) dev[i]->lin = gemm;
    dev[i]->d.split_keys = 64;  // the narrowest splits
    if (i > 0) ref.push_back(ref[0]->fork());
    std::vector<int32_t> pre(lens[i]), idx(lens[i]);
    for (int j = 0; j < lens[i]; ++j) pre[j] = (5 * j + 3 * i + 1) % cfg.vocab, idx[j] = j;
    const StepInput chain = StepInput::chain(pre, 0);
    dev[i]->run(chain, 0, lg, am);
    dev[i]->commit(idx, 0);
    ref[i]->forward(chain, SampleParams{}, nullptr);
    ref[i]->commit(idx);
  }
  // The batched step's buffers: slot 0's (any device's would do) with a step buffer of the batch layout.
  Device<E>& d0 = *dev[0];
  Buf bstep(size_t(batch_step_layout(256, cfg.layers).words) * 4);
  StepBuffers bb = d0.b;
  bb.step = static_cast<const int32_t*>(bstep.get());
  std::mt19937 rng(4242);
  int L[kSlots] = {lens[0], lens[1], lens[2]};
  const int V = cfg.vocab;
  // Rounds of {sizes, first output rows}: every row an output; a prompt chunk's last row, a chunk with none and a
  // decode step (the LM head on 2 gathered rows); no output at all (no LM head); every row again, on the caches
  // the rounds before wrote.
  const std::vector<std::pair<std::vector<int>, std::vector<int>>> rounds{
      {{6, 1, 12}, {0, 0, 0}}, {{3, 9, 1}, {2, 9, 0}}, {{4, 2, 5}, {4, 2, 5}}, {{2, 5, 3}, {0, 0, 0}}};
  for (const auto& [sizes, firsts] : rounds) {
    std::vector<StepInput> in(kSlots);
    std::vector<std::vector<float>> single(kSlots), aten(kSlots);
    std::vector<std::vector<int32_t>> single_am(kSlots), aten_am(kSlots);
    int total = 0;
    for (int i = 0; i < kSlots; ++i) {
      in[i] = sizes[i] == 1 ? StepInput::chain({int32_t(rng() % V)}, L[i]) : random_tree(rng, sizes[i], L[i], V);
      dev[i]->run(in[i], L[i], single[i], single_am[i]);  // the slot's own single-slot step
      aten_am[i] = ref[i]->forward(in[i], SampleParams{}, &aten[i]);
      total += sizes[i];
    }
    // Poison every slot's rows past its length (where the single-slot steps wrote their K/V): the commits below, and
    // so the next round, then read only what the batched step appended.
    for (int i = 0; i < kSlots; ++i)
      for (int l = 0; l < cfg.layers; ++l)
        for (void* c : {dev[i]->c.k[l], dev[i]->c.v[l]})
          std::memset(static_cast<char*>(c) + size_t(L[i]) * cfg.kv_heads * cfg.head_dim * sizeof(E), 0xff,
                      size_t(kCacheRows - L[i]) * cfg.kv_heads * cfg.head_dim * sizeof(E));
    BatchStepLayout lay = batch_step_layout(step_bucket(total), cfg.layers);
    std::vector<BatchSlotStep> bs(kSlots);
    for (int i = 0; i < kSlots; ++i) {
      bs[i].tokens = in[i].tokens.data();
      bs[i].positions = in[i].positions.data();
      bs[i].parents = in[i].parents.data();
      bs[i].T = sizes[i];
      bs[i].cache_len = L[i];
      bs[i].cache_rows = kCacheRows;
      bs[i].k = dev[i]->c.k.data();
      bs[i].v = dev[i]->c.v.data();
      bs[i].first_output = firsts[i];
    }
    fill_batch_step(bs.data(), kSlots, cfg.layers, lay, static_cast<int32_t*>(bstep.get()));
    const StepStatus st = enqueue_batch_step(d0.d, d0.w, bb, lay, kCacheRows, *d0.lin, nullptr);
    ASSERT_TRUE(st.ok()) << st.what;
    const auto errs = la_simt::take_errors();
    ASSERT_TRUE(errs.empty()) << errs.front();
    const E* blg = static_cast<const E*>(bb.logits);
    int outputs = 0;
    for (int i = 0; i < kSlots; ++i) outputs += sizes[i] - firsts[i];
    EXPECT_EQ(lay.step.lm_rows, lm_head_rows(outputs, lay.step.rows));
    EXPECT_EQ(lay.step.gather, outputs < total);
    for (int i = 0, row = 0; i < kSlots; ++i) {  // row: slot i's first output row of the batched logits
      const int T = sizes[i], first = firsts[i];
      std::vector<float> mine(size_t(T - first) * V);
      for (size_t k = 0; k < mine.size(); ++k) mine[k] = to_f(blg[size_t(row) * V + k]);
      EXPECT_EQ(std::memcmp(mine.data(), single[i].data() + size_t(first) * V, mine.size() * sizeof(float)), 0)
          << "slot " << i << " (T=" << T << ", first output " << first << ", L=" << L[i]
          << "): batched logits differ from its single-slot step";
      for (int t = first; t < T; ++t) {
        EXPECT_EQ(bb.argmax[row + t - first], single_am[i][t]) << "slot " << i << " token " << t;
        if (argmax_must_agree(ref_row(&aten[i][size_t(t) * V], V), {tol, argmax_exact})) {
          EXPECT_EQ(bb.argmax[row + t - first], aten_am[i][t]) << "slot " << i << " token " << t << " vs ATen";
        }
      }
      row += T - first;
    }
    for (int i = 0; i < kSlots; ++i) {  // each slot commits its deepest path (not a prefix for the trees)
      const std::vector<int32_t> path = deepest_path(in[i]);
      dev[i]->commit(path, L[i]);
      ref[i]->commit(path);
      L[i] += int(path.size());
    }
  }
}

TEST(SimtForward, BatchedStepIsEachSlotsStepFp32FixedGemm) {
  Timer tm{"batched fp32, fixed GEMM"};
  FixedLinear fixed;
  batched_step_matches_single<float>("fp32", kTolF32, true, &fixed);
  EXPECT_GT(fixed.calls, 0);
}
TEST(SimtForward, BatchedStepIsEachSlotsStepBf16) {
  Timer tm{"batched bf16"};
  batched_step_matches_single<__nv_bfloat16>("bf16", kTolBf16, false, nullptr);
}
TEST(SimtForward, BatchedStepIsEachSlotsStepFp16) {
  Timer tm{"batched fp16"};
  batched_step_matches_single<__half>("fp16", kTolBf16, false, nullptr);
}

// The two gathers of the step program on their own: embedding rows by device ids (an id outside the vocabulary
// gives zeros, not an out-of-bounds read) and the bias broadcast, both bit-exact copies, for 4- and 2-byte types.
TEST(SimtForward, EmbedRowsAndBroadcastRow) {
  const int V = 7, N = 300, rows = 5;  // N > 256 threads: two blocks per row
  std::vector<float> table(size_t(V) * N);
  for (size_t i = 0; i < table.size(); ++i) table[i] = float(i) * 0.25f - 100.f;
  const std::vector<int32_t> ids{3, 0, 6, 7, -1};
  auto run = [&](auto tag) {
    using E = decltype(tag);
    Buf t = upload<E>(table), out(size_t(rows) * (N + 4) * sizeof(E)), bc(size_t(rows) * N * sizeof(E));
    Buf dids(ids.size() * 4);
    std::copy(ids.begin(), ids.end(), static_cast<int32_t*>(dids.get()));
    const kern::DType dt = simt_elems::dtype_of<E>();
    ASSERT_EQ(kern::launch_embed_rows(dt, rows, N, static_cast<const int32_t*>(dids.get()), V, t.get(), N, out.get(),
                                      N + 4, nullptr),
              cudaSuccess);
    ASSERT_EQ(kern::launch_broadcast_row(dt, rows, N, static_cast<const E*>(t.get()) + 2 * N, bc.get(), N, nullptr),
              cudaSuccess);
    ASSERT_TRUE(la_simt::take_errors().empty());
    const E* te = static_cast<const E*>(t.get());
    const E* o = static_cast<const E*>(out.get());
    const E* b = static_cast<const E*>(bc.get());
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < N; ++i) {
        const bool in = ids[r] >= 0 && ids[r] < V;
        EXPECT_EQ(to_f(o[size_t(r) * (N + 4) + i]), in ? to_f(te[size_t(ids[r]) * N + i]) : 0.f) << r << "," << i;
        EXPECT_EQ(to_f(b[size_t(r) * N + i]), to_f(te[size_t(2) * N + i])) << r << "," << i;
      }
    }
  };
  run(float{});
  run(__nv_bfloat16{});
}

// The comparison can fail: a wrong norm weight in the step program's inputs (ln1 where ln2 belongs) is caught.
TEST(SimtForward, WrongNormWeightIsCaught) {
  bool mismatch = false;
  compare<float>(random_model_dir(), "fp32", {12}, {kTolF32, true}, true, &mismatch);
  EXPECT_TRUE(mismatch);
}

}  // namespace
