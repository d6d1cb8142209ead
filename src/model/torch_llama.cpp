// TorchLlama: the StepModel over libtorch weights. It owns the KV cache and sends each step to one forward: the
// CUDA kernel forward (torch_cuda_forward.cpp), or the ATen reference (torch_reference.cpp). Weights live in
// torch_weights.cpp, sampling in torch_sampling.cpp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <cstring>

#include "cuda_forward.h"
#include "lookahead/model/llama.h"
#include "lookahead/model/step_layout.h"
#include "lookahead/util/error.h"
#include "torch_reference.h"
#include "torch_sampling.h"
#include "torch_weights.h"

#ifdef LOOKAHEAD_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace la {
namespace {

std::vector<int32_t> to_host_ids(const at::Tensor& next) {
  at::Tensor nc = next.to(at::kInt).cpu().contiguous();
  return std::vector<int32_t>(nc.data_ptr<int32_t>(), nc.data_ptr<int32_t>() + nc.numel());
}

void copy_logits(const at::Tensor& logits, std::vector<float>* out) {
  at::Tensor lc = logits.cpu().contiguous();
  out->assign(lc.data_ptr<float>(), lc.data_ptr<float>() + lc.numel());
}

void check_step(const StepInput& in, const ModelConfig& cfg) {
  const int T = static_cast<int>(in.tokens.size());
  LA_CHECK(T > 0, "forward: empty step");
  LA_CHECK(in.positions.size() == in.tokens.size() && in.parents.size() == in.tokens.size(),
           "forward: tokens, positions and parents differ in length");
  for (int i = 0; i < T; ++i) {
    LA_CHECK(in.tokens[i] >= 0 && in.tokens[i] < cfg.vocab, "forward: token id ", in.tokens[i],
             " outside the vocabulary (", cfg.vocab, ")");
    LA_CHECK(in.positions[i] >= 0 && in.positions[i] < cfg.max_positions, "forward: position ", in.positions[i],
             " outside [0, ", cfg.max_positions, ")");
    LA_CHECK(in.parents[i] >= -1 && in.parents[i] < i, "forward: token ", i, " has invalid parent ", in.parents[i]);
  }
}

class TorchLlama final : public StepModel {
 public:
  TorchLlama(std::shared_ptr<const TorchWeights> w, std::string desc, bool kernels, bool graphs)
      : w_(std::move(w)), desc_(std::move(desc)), kernels_(kernels), graphs_(graphs) {
    rope_ = make_rope_tables(w_->cfg, w_->device);
    alloc_cache(w_->cfg.max_positions + 256);
    make_cuda_forward();
  }

  const ModelConfig& config() const override { return w_->cfg; }
  const TorchWeights& weights() const { return *w_; }
  int cache_len() const override { return len_; }
  std::string describe() const override {
    return kernel_note_.empty() ? desc_ : desc_.substr(0, desc_.size() - 1) + ", " + kernel_note_ + "]";
  }
  uint64_t checksum() const override { return weights_checksum(*w_); }

  // A replica sharing the weights (and rope tables) with an empty cache of its own.
  std::unique_ptr<StepModel> fork() const override { return fork_with(kernels_, graphs_); }
  // A fork whose forward uses (or not) the kernels and graphs: compares both paths on one set of weights.
  std::unique_ptr<TorchLlama> fork_with(bool kernels, bool graphs) const {
    return std::make_unique<TorchLlama>(w_, desc_, kernels, graphs);
  }

  std::vector<int32_t> forward(const StepInput& in, const SampleParams& sp, std::vector<float>* logits_out) override {
    check_step(in, w_->cfg);
    const int T = static_cast<int>(in.tokens.size());
    const int L = len_;
    if (L + T > cache_.capacity()) alloc_cache(std::max(L + T, cache_.capacity() * 2), /*keep=*/L);
    c10::InferenceMode ng;
    step_len_ = T;
#ifdef LOOKAHEAD_WITH_CUDA
    if (cf_ && T <= CudaForward::kMaxRows) {
      const int R = step_bucket(T);  // padding rows write K/V past the step too
      if (L + R > cache_.capacity()) alloc_cache(std::max(L + R, cache_.capacity() * 2), /*keep=*/L);
      cf_->run(in, L, cache_.capacity());
      if (sp.greedy() && !logits_out) return cf_->argmax_to_host(T);
      at::Tensor logits = cf_->logits(T).to(at::kFloat);
      std::vector<int32_t> out =
          sp.greedy() ? cf_->argmax_to_host(T) : to_host_ids(sample_tokens(logits, in.positions, sp));
      if (logits_out) copy_logits(logits, logits_out);
      return out;
    }
#endif
    at::Tensor logits = reference_forward(*w_, rope_, cache_, in, L);  // [T, V] fp32
    std::vector<int32_t> out = to_host_ids(sp.greedy() ? logits.argmax(-1) : sample_tokens(logits, in.positions, sp));
    if (logits_out) copy_logits(logits, logits_out);
    return out;
  }

  void commit(const std::vector<int32_t>& idx) override {
    if (idx.empty()) return;
    const int m = static_cast<int>(idx.size());
    for (auto i : idx) LA_CHECK(i >= 0 && i < step_len_, "commit: index ", i, " outside the last step (", step_len_, ")");
    LA_CHECK(len_ + m <= w_->cfg.max_positions, "commit: cache would exceed max positions");
    c10::InferenceMode ng;
    bool identity = true;
    for (int j = 0; j < m; ++j) identity = identity && idx[j] == j;
#ifdef LOOKAHEAD_WITH_CUDA
    bool path_order = true;  // the commit kernel copies in place: needs idx strictly increasing with idx[j] >= j
    for (int j = 0; j < m; ++j) path_order = path_order && idx[j] >= j && (j == 0 || idx[j] > idx[j - 1]);
    if (!identity && path_order && cf_ && m <= CudaForward::kMaxRows) {  // one kernel for all layers, no allocation
      cf_->commit(idx, len_);
      identity = true;
    }
#endif
    if (!identity) {
      std::vector<int64_t> rows(idx.begin(), idx.end());
      for (auto& r : rows) r += len_;
      at::Tensor ri = at::from_blob(rows.data(), {m}, at::TensorOptions().dtype(at::kLong)).to(w_->device);
      for (int l = 0; l < w_->cfg.layers; ++l) {
        at::Tensor kk = cache_.k[l].index_select(0, ri), vv = cache_.v[l].index_select(0, ri);
        cache_.k[l].narrow(0, len_, m).copy_(kk);
        cache_.v[l].narrow(0, len_, m).copy_(vv);
      }
    }
    len_ += m;
    step_len_ = 0;
  }

  void truncate(int len) override {
    LA_CHECK(len >= 0 && len <= len_, "truncate: length ", len, " outside [0, ", len_, "]");
    len_ = len;
    step_len_ = 0;
  }

 private:
  // The kernel forward for CUDA models with --kernels on (when the shapes allow; else the ATen forward serves).
  void make_cuda_forward() {
    kernel_note_.clear();
#ifdef LOOKAHEAD_WITH_CUDA
    if (!w_->device.is_cuda() || !kernels_) return;
    const std::string why = CudaForward::unsupported_reason(w_->cfg, w_->dtype);
    if (!why.empty()) {
      kernel_note_ = "kernels off: " + why;
      return;
    }
    CudaModelRefs r;
    r.cfg = &w_->cfg;
    r.dtype = w_->dtype;
    r.embed = w_->embed;
    r.norm = w_->norm;
    r.lm_head = w_->lm_head;
    r.inv_freq = rope_.inv_freq;
    r.layers = &w_->layers;
    r.kc = &cache_.k;
    r.vc = &cache_.v;
    cf_ = std::make_unique<CudaForward>(r, graphs_);
    kernel_note_ = graphs_ ? "kernels, graphs" : "kernels";
#endif
  }

  void alloc_cache(int cap, int keep = 0) {
    c10::InferenceMode ng;
    cache_ = make_kv_cache(*w_, cap, &cache_, keep);
#ifdef LOOKAHEAD_WITH_CUDA
    if (cf_) cf_->cache_changed();
#endif
  }

  std::shared_ptr<const TorchWeights> w_;
  std::string desc_;
  bool kernels_, graphs_;
  RopeTables rope_;
  KvCache cache_;
  int len_ = 0, step_len_ = 0;
  std::string kernel_note_;  // shown in describe(): "kernels, graphs", or why the kernels are off
#ifdef LOOKAHEAD_WITH_CUDA
  std::unique_ptr<CudaForward> cf_;
#endif
};

at::Device make_device(const LoadOptions& o) {
  if (o.device == "cpu") return at::Device(at::kCPU);
  LA_CHECK(o.device == "cuda", "invalid --device '", o.device, "' (expected cpu or cuda)");
#ifdef LOOKAHEAD_WITH_CUDA
  const int n = cuda_device_count();
  LA_CHECK(n > 0, "--device cuda: no CUDA device is visible");
  LA_CHECK(o.device_index >= 0 && o.device_index < n, "--device cuda: device index ", o.device_index,
           " but only ", n, " device(s) visible");
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(o.device_index));
#else
  fail("--device cuda: this build has no CUDA support (rebuild with nvcc and a CUDA libtorch)");
#endif
}

}  // namespace

const TorchWeights* torch_weights_of(const StepModel& m) {
  const auto* tm = dynamic_cast<const TorchLlama*>(&m);
  return tm ? &tm->weights() : nullptr;
}

std::unique_ptr<StepModel> fork_with_kernels(const StepModel& model, bool kernels, bool graphs) {
  const auto* tm = dynamic_cast<const TorchLlama*>(&model);
  LA_CHECK(tm != nullptr, "fork_with_kernels: not a libtorch model");
  return tm->fork_with(kernels, graphs);
}

int cuda_device_count() {
#ifdef LOOKAHEAD_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

std::unique_ptr<StepModel> load_llama(const LoadOptions& o) {
  const at::ScalarType dt = parse_dtype(o.dtype);
  LA_CHECK(o.kernels == "on" || o.kernels == "off", "invalid --kernels '", o.kernels, "' (expected on or off)");
  if (o.threads > 0) at::set_num_threads(o.threads);
  const at::Device dev = make_device(o);
  auto w = load_weights(o, dev, dt);
  return std::make_unique<TorchLlama>(w, o.model + " [" + o.dtype + ", " + o.device + "]", o.kernels == "on",
                                      o.cuda_graphs);
}

void save_hf_directory(StepModel& model, const std::string& dir) {
  const TorchWeights* w = torch_weights_of(model);
  LA_CHECK(w != nullptr, "save: not a libtorch model");
  save_weights_hf(*w, dir);
}

}  // namespace la
