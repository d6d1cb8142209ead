// TorchLlama: the StepModel over libtorch weights. It owns the KV cache and sends each step to one forward: the
// CUDA backend's kernel forward (src/backend/cuda, handed CudaModelRefs), the CPU backend's kernel forward
// (src/backend/cpu, no ATen: this file hands it raw views of the weights and the cache), or the ATen reference
// (torch_reference.cpp, --kernels off). Weights live in torch_weights.cpp, sampling in torch_sampling.cpp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <cstring>
#include <set>

#include "backend/cuda/cuda_forward.h"
#include "lookahead/backend/cpu/cpu_forward.h"
#include "lookahead/backend/cpu/thread_pool.h"
#include "lookahead/engine/llama.h"
#include "lookahead/engine/selfcheck.h"
#include "lookahead/backend/cuda/step_layout.h"
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
  LA_CHECK(in.first_output >= 0 && in.first_output <= T, "forward: first output row ", in.first_output,
           " outside [0, ", T, "]");
}

// The first row whose next token is chosen: StepInput::first_output, or 0 when the caller reads every row's logits.
int first_output(const StepInput& in, const std::vector<float>* logits) { return logits ? 0 : in.first_output; }

// Rows before the first output choose no next token, on every backend (the CPU kernels and the CUDA step program
// do not compute them; the ATen reference does, and its results are dropped so that no caller can come to read
// them).
void drop_unread(const StepInput& in, std::vector<int32_t>& out) {
  for (int t = 0; t < in.first_output && t < static_cast<int>(out.size()); ++t) out[t] = -1;
}

// Samples rows first .. T-1 (first < T) of a step from their [T - first, V] logits into out[first ..].
void sample_rows(const at::Tensor& logits, int first, const StepInput& in, const SampleParams& sp,
                 std::vector<int32_t>& out) {
  const std::vector<int32_t> pos(in.positions.begin() + first, in.positions.end());
  const std::vector<int32_t> got = to_host_ids(sample_tokens(logits, pos, sp));
  std::copy(got.begin(), got.end(), out.begin() + first);
}
void sample_rows(const float* lg, int first, const StepInput& in, int vocab, const SampleParams& sp,
                 std::vector<int32_t>& out) {
  const int T = static_cast<int>(in.tokens.size());
  sample_rows(at::from_blob(const_cast<float*>(lg), {T - first, vocab}, at::kFloat), first, in, sp, out);
}

#ifdef LOOKAHEAD_WITH_CUDA
// The results of a CUDA step's item whose output rows (first .. T-1) are rows o .. o + T - first of the forward's
// logits and of `am` (its argmax on the host): out[t] for t >= first, -1 before.
void cuda_results(const CudaForward& cf, const int32_t* am, int o, int first, const StepInput& in,
                  const SampleParams& sp, std::vector<int32_t>& out, std::vector<float>* logits_out) {
  const int T = static_cast<int>(in.tokens.size()), n = T - first;
  out.assign(T, -1);
  if (sp.greedy()) std::copy(am + o, am + o + n, out.begin() + first);
  if (n > 0 && (!sp.greedy() || logits_out)) {
    const at::Tensor logits = cf.logits_at(o, n).to(at::kFloat);
    if (!sp.greedy()) sample_rows(logits, first, in, sp, out);
    if (logits_out) copy_logits(logits, logits_out);  // first == 0 (first_output(): the caller reads every row)
  }
}
#endif

WType wtype_of(at::ScalarType t) {
  return t == at::kHalf ? WType::F16 : t == at::kBFloat16 ? WType::BF16 : WType::F32;
}

WeightView view_of(const at::Tensor& t) {
  LA_CHECK(t.is_contiguous() && t.dim() == 2, "internal: CPU kernels need contiguous 2-d weights");
  return WeightView{t.data_ptr(), wtype_of(t.scalar_type()), int(t.size(0)), int(t.size(1))};
}

const void* data_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// What the CPU kernels read: panel copies of the matrices (the ATen tensors stay, for --kernels off forks), raw
// pointers to the vectors. The rope tables are the caller's.
CpuModelView cpu_model_view(const TorchWeights& w) {
  CpuModelView v;
  v.type = wtype_of(w.dtype);
  v.embed = w.embed.is_meta() ? nullptr : w.embed.data_ptr();
  v.embed_rows = w.embed_rows;
  v.norm = w.norm.data_ptr();
  auto pack = [&](const at::Tensor& t) {  // GGUF matrices kept quantized (torch_weights.h), else the float copy
    if (const auto p = w.packed.find(quant_key(t)); p != w.packed.end()) return p->second;  // packed at load
    const auto it = w.quant.find(quant_key(t));
    if (it == w.quant.end()) return pack_weight(view_of(t));
    // The file's pages read are copied into the panels: out of the resident set as packing goes
    return pack_quant_weight(it->second, [&w] {
      if (w.quant_source) w.quant_source->release_pages();
    });
  };
  v.lm_head = pack(w.lm_head);
  for (const LayerW& L : w.layers)
    v.layers.push_back(CpuLayerView{pack(L.wqkv), pack(L.wo), pack(L.wgu), pack(L.wd), L.ln1.data_ptr(),
                                    L.ln2.data_ptr(), data_or_null(L.bqkv), data_or_null(L.bo)});
  for (size_t l = 0; l < v.layers.size(); ++l) {  // the architectures' optional norms (null when absent)
    const LayerW& L = w.layers[l];
    v.layers[l].qn = data_or_null(L.qn);
    v.layers[l].kn = data_or_null(L.kn);
    v.layers[l].ln_pre_ff = data_or_null(L.ln_pre_ff);
    v.layers[l].ln_post_ff = data_or_null(L.ln_post_ff);
  }
  return v;
}

class TorchLlama final : public StepModel {
 public:
  static constexpr int kForkCacheRows = 256;  // a fork's first cache: grown or reserved on demand
  TorchLlama(std::shared_ptr<const TorchWeights> w, std::string desc, bool kernels, bool graphs, bool fixed_gemm,
             std::shared_ptr<ThreadPool> pool, std::shared_ptr<const CpuModelView> cpu_weights = nullptr,
             int cache_rows = 0)
      : w_(std::move(w)),
        desc_(std::move(desc)),
        kernels_(kernels),
        graphs_(graphs),
        fixed_gemm_(fixed_gemm),
        pool_(std::move(pool)),
        cpu_weights_(std::move(cpu_weights)) {
    rope_ = make_rope_tables(w_->cfg, w_->device);
    make_cpu_forward();
    // The KV cache starts at what short requests need and doubles on demand up to the context (+256 rows of step
    // slack): a 131k-context model does not reserve its whole context (17 GiB for Llama-3-8B) before the first token.
    // A fork starts at kForkCacheRows: a batch's slots are sized by reserve_cache at admission, and 15 forks of
    // SmolLM2 at 4352 rows zeroed 3 GB inside the job (17% of a --batch 8 run's profile, with libgomp's threads
    // spinning after each fill).
    alloc_cache(cache_rows > 0 ? cache_rows : std::min(w_->cfg.max_positions, 4096) + 256);
    make_cuda_forward();
  }

  const ModelConfig& config() const override { return w_->cfg; }
  const TorchWeights& weights() const { return *w_; }
  int cache_len() const override { return len_; }
  std::string describe() const override {
    std::string note = kernel_note_;
    if (!selfcheck_note_.empty()) note += (note.empty() ? "" : ", ") + selfcheck_note_;
    return note.empty() ? desc_ : desc_.substr(0, desc_.size() - 1) + ", " + note + "]";
  }
  void set_desc(std::string d) { desc_ = std::move(d); }
  // The bytes the weights hold in memory: the CPU kernels' panels and every float tensor (each storage once; the
  // matrices without a float copy are meta tensors and count nothing). Pages of a mapped GGUF read on demand (the
  // embedding rows a lookup dequantizes) are not counted.
  size_t resident_weight_bytes() const {
    size_t n = 0;
    if (cpu_weights_) {
      n += cpu_weights_->lm_head.bytes;
      if (cpu_weights_->head_sketch) n += cpu_weights_->head_sketch->bytes();
      for (const CpuLayerView& L : cpu_weights_->layers) n += L.wqkv.bytes + L.wo.bytes + L.wgu.bytes + L.wd.bytes;
    }
    std::set<const void*> seen;
    auto add = [&](const at::Tensor& t) {
      if (!t.defined() || t.is_meta() || !seen.insert(t.storage().data()).second) return;
      n += t.storage().nbytes();
    };
    for (const auto& [name, t] : w_->unfused) add(t);
    for (const at::Tensor* t : {&w_->embed, &w_->norm, &w_->lm_head}) add(*t);
    for (const LayerW& L : w_->layers)
      for (const at::Tensor* t : {&L.ln1, &L.wqkv, &L.bqkv, &L.wo, &L.bo, &L.ln2, &L.wgu, &L.wd, &L.qn, &L.kn,
                                  &L.ln_pre_ff, &L.ln_post_ff})
        add(*t);
    return n;
  }
  // The self-check's summary, shown in describe() (apply_selfcheck).
  void set_selfcheck_note(std::string s) { selfcheck_note_ = std::move(s); }
  // Whether a kernel forward (CUDA or CPU) serves, i.e. whether a self-check has anything to check.
  bool has_fast_path() const {
#ifdef LOOKAHEAD_WITH_CUDA
    if (cf_) return true;
#endif
    return static_cast<bool>(cpu_);
  }
  bool uses_graphs() const { return w_->device.is_cuda() && graphs_; }
  uint64_t checksum() const override { return weights_checksum(*w_); }

  // A replica sharing the weights (and rope tables) with an empty cache of its own.
  std::unique_ptr<StepModel> fork() const override { return fork_with(kernels_, graphs_); }
  // A fork whose forward uses (or not) the kernels and graphs: compares both paths on one set of weights.
  std::unique_ptr<TorchLlama> fork_with(bool kernels, bool graphs) const {
    LA_CHECK(kernels || !w_->floats_dropped, "the ATen forward needs the float weights, which were dropped for the "
             "GGUF matrices kept quantized (set LOOKAHEAD_GGUF_QUANT=dequant, or --kernels off at load)");
    return std::make_unique<TorchLlama>(w_, desc_, kernels, graphs, fixed_gemm_, pool_, cpu_weights_, kForkCacheRows);
  }

  std::vector<int32_t> forward(const StepInput& in, const SampleParams& sp, std::vector<float>* logits_out) override {
    std::vector<int32_t> out;
    forward_into(in, sp, out, logits_out);
    return out;
  }

  // forward() into the caller's vector (capacity kept): the step loop's path (forward_batch) on the CPU and CUDA
  // kernels allocates nothing per step, one request alone or a batch.
  void forward_into(const StepInput& in, const SampleParams& sp, std::vector<int32_t>& out,
                    std::vector<float>* logits_out) {
    if (cpu_) {  // the CPU kernels: the batched path with one segment
      const BatchItem it{this, &in, &sp, &out, logits_out};
      cpu_forward_batch(&it, 1);
      return;
    }
    check_step(in, w_->cfg);
    const int T = static_cast<int>(in.tokens.size());
    const int L = len_;
    if (L + T > cache_.capacity()) alloc_cache(grown_capacity(L + T), /*keep=*/L);
    c10::InferenceMode ng;
    step_len_ = T;
#ifdef LOOKAHEAD_WITH_CUDA
    if (cf_ && T <= CudaForward::kMaxRows) {
      const int R = step_bucket(T);  // padding rows write K/V past the step too
      if (L + R > cache_.capacity()) alloc_cache(grown_capacity(L + R), /*keep=*/L);
      const int first = first_output(in, logits_out);
      cf_->run(in, L, cache_.capacity(), first);
      cuda_results(*cf_, cf_->argmax_to_host(T - first), 0, first, in, sp, out, logits_out);
      return;
    }
#endif
    at::Tensor logits = reference_forward(*w_, rope_, cache_, in, L);  // [T, V] fp32
    out = to_host_ids(sp.greedy() ? logits.argmax(-1) : sample_tokens(logits, in.positions, sp));
    if (logits_out) copy_logits(logits, logits_out);
    drop_unread(in, out);
  }

  // The CPU kernels run every item's rows in one forward (CpuForward segments, each over its own replica's cache),
  // and so does the CUDA kernel forward (CudaForward::run_batch: one batched step program per group of at most
  // kMaxRows rows and kMaxBatchSlots items). The ATen reference (--kernels off) and models that are not forks of
  // this one run one forward per item: ATen's GEMMs are not batch-invariant across row counts (measured with this
  // torch on the CPU, fp32 F.linear 576x576: 423 of a row's 576 outputs change bits between M = 1 and M = 2), so
  // batching its linear layers would make a request's tokens depend on its neighbours.
  void forward_batch(const BatchItem* items, int n) override {
#ifdef LOOKAHEAD_WITH_CUDA
    if (cf_) return cuda_forward_batch(items, n);
#endif
    bool together = cpu_ != nullptr;
    for (int i = 0; i < n && together; ++i) {
      const auto* m = dynamic_cast<const TorchLlama*>(items[i].model);
      together = m != nullptr && m->w_ == w_ && m->cpu_ != nullptr;
    }
    if (!together) return StepModel::forward_batch(items, n);
    cpu_forward_batch(items, n);
  }

  // Every item's rows in one CPU forward, each item's results written into its own vector (kept capacity: a step of
  // the step loop allocates nothing, one request alone or a batch).
  void cpu_forward_batch(const BatchItem* items, int n) {
    c10::InferenceMode ng;
    segs_.resize(n);  // capacity kept: no allocation once the largest batch has run
    for (int i = 0; i < n; ++i) {
      auto* m = static_cast<TorchLlama*>(items[i].model);
      check_step(*items[i].in, w_->cfg);
      const int T = static_cast<int>(items[i].in->tokens.size());
      if (m->len_ + T > m->cache_.capacity()) m->alloc_cache(m->grown_capacity(m->len_ + T), /*keep=*/m->len_);
      m->step_len_ = T;
      segs_[i] = CpuSegment{items[i].in, &m->cpu_->cache(), m->len_, first_output(*items[i].in, items[i].logits),
                            items[i].sp->greedy() && items[i].logits == nullptr};
    }
    cpu_->run(segs_.data(), n);
    for (int i = 0, row = 0; i < n; ++i) {
      const StepInput& in = *items[i].in;
      const int T = static_cast<int>(in.tokens.size()), first = segs_[i].first_output;
      std::vector<int32_t>& out = *items[i].out;
      out.assign(T, -1);
      if (items[i].sp->greedy()) {
        cpu_->argmax(T, out.data(), row);
      } else if (first < T) {
        sample_rows(cpu_->logits_row(row + first), first, in, w_->cfg.vocab, *items[i].sp, out);
      }
      if (items[i].logits) {
        const float* lg = cpu_->logits_row(row);
        items[i].logits->assign(lg, lg + size_t(T) * w_->cfg.vocab);
      }
      drop_unread(in, out);
      row += T;
    }
  }

#ifdef LOOKAHEAD_WITH_CUDA
  // Groups of consecutive items whose models are CUDA-kernel forks of this one go through run_batch together; an
  // item that cannot join (another model, a step too large) runs its own forward.
  void cuda_forward_batch(const BatchItem* items, int n) {
    c10::InferenceMode ng;
    auto batchable = [&](const BatchItem& it) {
      const auto* m = dynamic_cast<const TorchLlama*>(it.model);
      const int T = static_cast<int>(it.in->tokens.size());
      return m != nullptr && m->w_ == w_ && m->cf_ != nullptr && T <= CudaForward::kMaxRows &&
             m->len_ + T <= cf_->max_batch_cache_rows();
    };
    for (int i = 0; i < n;) {
      int j = i, rows = 0;
      while (j < n && j - i < kMaxBatchSlots && batchable(items[j]) &&
             rows + int(items[j].in->tokens.size()) <= CudaForward::kMaxRows)
        rows += int(items[j++].in->tokens.size());
      if (j - i <= 1) {  // alone: its own forward (a lone request's step: into its kept vector)
        const BatchItem& it = items[i];
        if (auto* m = dynamic_cast<TorchLlama*>(it.model)) m->forward_into(*it.in, *it.sp, *it.out, it.logits);
        else *it.out = it.model->forward(*it.in, *it.sp, it.logits);
        i = std::max(j, i + 1);
        continue;
      }
      cslots_.resize(j - i);  // capacity kept: no allocation once the largest batch has run
      int outputs = 0;        // rows with the LM head (step_layout.h)
      for (int k = i; k < j; ++k) {
        auto* m = static_cast<TorchLlama*>(items[k].model);
        check_step(*items[k].in, w_->cfg);
        const int T = static_cast<int>(items[k].in->tokens.size());
        if (m->len_ + T > m->cache_.capacity()) m->alloc_cache(m->grown_capacity(m->len_ + T), /*keep=*/m->len_);
        m->step_len_ = T;
        const int first = first_output(*items[k].in, items[k].logits);
        cslots_[k - i] = CudaForward::Slot{items[k].in, &m->cf_->caches(), m->len_, first};
        outputs += T - first;
      }
      cf_->run_batch(cslots_.data(), j - i);
      const int32_t* am = cf_->argmax_to_host(outputs);  // synchronises
      for (int k = i, o = 0; k < j; ++k) {
        const int T = static_cast<int>(items[k].in->tokens.size()), first = cslots_[k - i].first_output;
        cuda_results(*cf_, am, o, first, *items[k].in, *items[k].sp, *items[k].out, items[k].logits);
        o += T - first;
      }
      i = j;
    }
  }
#endif

  void commit(const std::vector<int32_t>& idx) override {
    if (idx.empty()) return;
    const int m = static_cast<int>(idx.size());
    for (auto i : idx) LA_CHECK(i >= 0 && i < step_len_, "commit: index ", i, " outside the last step (", step_len_, ")");
    LA_CHECK(len_ + m <= w_->cfg.max_positions, "commit: cache would exceed max positions");
    c10::InferenceMode ng;
    bool identity = true;
    for (int j = 0; j < m; ++j) identity = identity && idx[j] == j;
    bool path_order = true;  // in-place commits need idx strictly increasing with idx[j] >= j
    for (int j = 0; j < m; ++j) path_order = path_order && idx[j] >= j && (j == 0 || idx[j] > idx[j - 1]);
    if (!identity && path_order && cpu_) {
      cpu_->commit_rows(idx, len_);
      identity = true;
    }
#ifdef LOOKAHEAD_WITH_CUDA
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

  void reserve_cache(int rows) override {
    if (len_ == 0 && rows > 0 && rows != cache_.capacity()) alloc_cache(std::min(rows, w_->cfg.max_positions + 256));
  }

  void truncate(int len) override {
    LA_CHECK(len >= 0 && len <= len_, "truncate: length ", len, " outside [0, ", len_, "]");
    len_ = len;
    step_len_ = 0;
  }

 private:
  // The CPU kernel forward for CPU models with --kernels on (when the model's shapes allow).
  void make_cpu_forward() {
    if (!w_->device.is_cpu() || !kernels_) return;
    const std::string why = CpuForward::unsupported_reason(w_->cfg);
    if (!why.empty()) {
      kernel_note_ = "cpu kernels off: " + why;
      return;
    }
    // The GEMM's panel copies of the weights are made once and shared by every fork (replicas, simulated ranks).
    if (!cpu_weights_) {
      CpuModelView v = cpu_model_view(*w_);
      // LOOKAHEAD_HEAD_SKETCH=off: every greedy step computes every logit (benchmarks of the sketch against it).
      const char* env = std::getenv("LOOKAHEAD_HEAD_SKETCH");
      const bool off = env != nullptr && std::string(env) == "off";
      if (!off && head_sketch_supports(v.lm_head) && w_->cfg.final_softcap <= 0)
        v.head_sketch = std::make_shared<const HeadSketch>(build_head_sketch(*pool_, v.lm_head));
      cpu_weights_ = std::make_shared<const CpuModelView>(std::move(v));
    }
    CpuModelView v = *cpu_weights_;
    v.rope_cos = rope_.cos.data_ptr<float>();
    v.rope_sin = rope_.sin.data_ptr<float>();
    if (rope_.cos_local.defined()) {
      v.rope_cos_local = rope_.cos_local.data_ptr<float>();
      v.rope_sin_local = rope_.sin_local.data_ptr<float>();
    }
    cpu_ = std::make_unique<CpuForward>(w_->cfg, v, pool_);
    kernel_note_ = cpu_->describe();
  }

  // The kernel forward for CUDA models with --kernels on (when the shapes allow; else the ATen forward serves).
  void make_cuda_forward() {
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
    for (const LayerW& L : w_->layers) r.layers.push_back({L.ln1, L.wqkv, L.bqkv, L.wo, L.bo, L.ln2, L.wgu, L.wd});
    r.kc = &cache_.k;
    r.vc = &cache_.v;
    cf_ = std::make_unique<CudaForward>(r, graphs_, fixed_gemm_);
    kernel_note_ = std::string(graphs_ ? "kernels, graphs" : "kernels") + (fixed_gemm_ ? ", fixed GEMM" : ", cuBLAS GEMM");
#endif
  }

  // Doubling, but not past the context (+256 rows of step slack) unless the step itself needs more.
  int grown_capacity(int need) const {
    return std::max(need, std::min(cache_.capacity() * 2, w_->cfg.max_positions + 256));
  }

  void alloc_cache(int cap, int keep = 0) {
    c10::InferenceMode ng;
    cache_ = make_kv_cache(*w_, cap, &cache_, keep);
    if (cpu_) {
      std::vector<void*> k, v;
      for (int l = 0; l < w_->cfg.layers; ++l) {
        k.push_back(cache_.k[l].data_ptr());
        v.push_back(cache_.v[l].data_ptr());
      }
      cpu_->set_cache(k, v, cache_.capacity());
    }
#ifdef LOOKAHEAD_WITH_CUDA
    if (cf_) cf_->cache_changed();
#endif
  }

  std::shared_ptr<const TorchWeights> w_;
  std::string desc_;
  bool kernels_, graphs_;
  bool fixed_gemm_ = true;  // CUDA kernel forward: kernels/gemm_rows (true) or cuBLAS
  std::shared_ptr<ThreadPool> pool_;  // shared with forks: one pool for every replica in the process
  RopeTables rope_;
  KvCache cache_;
  int len_ = 0, step_len_ = 0;
  std::string kernel_note_;  // shown in describe(): which kernels serve, or why none do
  std::string selfcheck_note_;
  std::shared_ptr<const CpuModelView> cpu_weights_;  // packed once, shared with forks
  std::unique_ptr<CpuForward> cpu_;
  std::vector<CpuSegment> segs_;  // forward_batch's segments, reused
#ifdef LOOKAHEAD_WITH_CUDA
  std::unique_ptr<CudaForward> cf_;
  std::vector<CudaForward::Slot> cslots_;  // forward_batch's slots, reused
#endif
};

at::Device make_device(const LoadOptions& o) {
  if (o.device == "cpu") return at::Device(at::kCPU);  // else "cuda" (LoadOptions::validate)
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

// --selfcheck: the fast path is checked against the ATen forward on forks sharing the weights; the first path that
// agrees serves (src/engine/selfcheck.cpp). Default: on with --device cuda, off on CPU.
std::unique_ptr<TorchLlama> apply_selfcheck(std::unique_ptr<TorchLlama> m, const LoadOptions& o) {
  const SelfCheckMode mode = parse_selfcheck_mode(o.selfcheck.empty() ? (o.device == "cuda" ? "on" : "off")
                                                                        : o.selfcheck);
  // By default only a model with a fast path is checked; an explicit --selfcheck always runs (with --kernels off
  // the candidate is the ATen forward itself: a check of the machinery).
  if (mode == SelfCheckMode::Off || o.kernels == "off" || (o.selfcheck.empty() && !m->has_fast_path())) return m;
  std::vector<ServingPath> paths;
  if (m->uses_graphs()) paths.push_back({true, true});
  paths.push_back({true, false});
  SelfCheckOptions so;
  so.mode = mode;
  so.dtype = o.dtype;
  const SelfCheckReport rep = run_selfcheck(
      [&](const ServingPath& p) {
        return selfcheck_fault_for_testing(std::unique_ptr<StepModel>(m->fork_with(p.kernels, p.graphs)), p);
      },
      paths, so);
  if (!(rep.serving == paths.front())) m = m->fork_with(rep.serving.kernels, rep.serving.graphs);
  m->set_selfcheck_note(rep.summary());
  return m;
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

// LoadOptions::validate: load_options.cpp.

std::unique_ptr<StepModel> load_llama(const LoadOptions& o) {
  o.validate();
  const at::ScalarType dt = parse_dtype(o.dtype);
  if (o.threads > 0) at::set_num_threads(o.threads);
  const at::Device dev = make_device(o);
  auto w = load_weights(o, dev, dt);
  auto pool = std::make_shared<ThreadPool>(o.threads > 0 ? o.threads : ThreadPool::default_threads());
  // A GGUF's weights were dequantized at load (src/model/gguf_model.cpp): the load line names what from.
  const std::string& src = w->cfg.source_dtype;
  const bool gguf = src.rfind("GGUF ", 0) == 0;
  const bool plain = src == "GGUF F32" || src == "GGUF F16" || src == "GGUF BF16";
  std::string from = !gguf ? "" : plain ? ", from " + src : ", dequantized from " + src.substr(5);
  if (!w->quant_note.empty() && o.kernels == "on") from = ", GGUF " + src.substr(5) + ": " + w->quant_note;
  auto m = std::make_unique<TorchLlama>(w, o.model + " [" + o.dtype + from + ", " + o.device + "]", o.kernels == "on",
                                        o.cuda_graphs, o.cuda_gemm == "fixed", std::move(pool));
  if (!w->quant_note.empty() && o.kernels == "on") {  // what the weights hold in memory, panels made
    const size_t mib = (m->resident_weight_bytes() + (size_t(1) << 19)) >> 20;
    m->set_desc(o.model + " [" + o.dtype + from + ", weights " + std::to_string(mib) + " MiB resident, " + o.device + "]");
  }
  return apply_selfcheck(std::move(m), o);
}

void save_hf_directory(StepModel& model, const std::string& dir) {
  const TorchWeights* w = torch_weights_of(model);
  LA_CHECK(w != nullptr, "save: not a libtorch model");
  save_weights_hf(*w, dir);
}

}  // namespace la
