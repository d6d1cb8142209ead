// The CUDA step forward: the lookahead kernels (embedding gather, fused add+RMSNorm, RoPE on the fused qkv, KV
// append at a device-side length, step attention under packed ancestor bits, SwiGLU, row argmax) around the
// projections' GEMMs (kernels/gemm_rows by default, cuBLAS with --cuda-gemm cublas), on static buffers, with one CUDA graph per step bucket (see cuda_forward.h and step_layout.h). The launches
// themselves are the device-agnostic step program (cuda_step.h: run on the CPU under the SIMT emulation by
// test_simt_forward); this file owns the tensors, the graphs and the cuBLAS GEMMs (CublasLinear below).
//
// Per step the host does: pad the step to its bucket and pack the ancestor bits into one pinned buffer (with ids,
// positions, parents and the cache length), one non-blocking host-to-device copy, one graph replay (or the eager
// launches), one device-to-host copy of the T argmax ids, one stream synchronisation. Nothing is allocated. A
// batched step (run_batch: several requests' slots, each its own cache) does the same with the slots' cache
// pointers, lengths and capacities in that one upload, on graphs of its own per bucket.
//
// Graphs: a bucket's first step runs eagerly (warm-up: cuBLAS handles and workspaces, kernel attributes), its
// second is captured with at::cuda::CUDAGraph on a side stream made c10's current stream (so ATen and the kernel
// adapters launch on the capturing stream) and replayed on the caller's stream from then on. Every bucket shares
// one graph memory pool. Everything a graph reads lives at fixed addresses, and everything that varies between
// replays (ids, positions, parents, ancestor bits, cache length) is read from the device step buffer: the KV
// append and the attention take the cache length from there, so one graph serves every cache length (the
// attention's splits are laid out for the cache capacity: empty splits past the length cost a launch slot, no bits).
//
// Batch invariance: the attention's split boundaries sit at fixed key positions (split_keys_, fixed per model) and
// a row's step keys are read by position, so a token's attention output does not depend on the bucket, the tree or
// the cache length (every dtype on the default scalar path; kernels/step_attention.cuh). The default GEMM reduces
// every output over k in one fixed order whatever M (kernels/gemm_rows.h); cuBLAS (--cuda-gemm cublas) picks its
// algorithm by M, so with it a token's logits can move in the last bits with the bucket (docs/gpu.md section 5).
#ifdef LOOKAHEAD_WITH_CUDA
#include "cuda_forward.h"

#include <ATen/cuda/CUDAContext.h>  // getCurrentCUDABlasHandle, cublas_v2.h
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>

#include "host/cuda_support.h"
#include "lookahead/util/error.h"
#include "gemm_rows.h"
#include "kv_cache.h"
#include "ops.h"
#include "step_attention.h"
#include "verify.h"

namespace la {
namespace {

kern::DType kdtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return kern::DType::F32;
    case at::kHalf: return kern::DType::F16;
    case at::kBFloat16: return kern::DType::BF16;
    default: fail("CUDA forward: unsupported dtype ", t);
  }
}

void ck(cudaError_t e, const char* what) {
  LA_CHECK(e == cudaSuccess, "CUDA forward: ", what, ": ", cudaGetErrorString(e));
}

cudaStream_t cur_stream(const at::Device& d) { return c10::cuda::getCurrentCUDAStream(d.index()).stream(); }

// A weight's pointer for the step program: contiguous (row-major [N, K], row stride K), or null when absent.
const void* wptr(const at::Tensor& t) {
  if (!t.defined()) return nullptr;
  LA_CHECK(t.is_contiguous(), "CUDA forward: a weight is not contiguous");
  return t.data_ptr();
}

cudaDataType_t cuda_type(kern::DType t) {
  switch (t) {
    case kern::DType::F32: return CUDA_R_32F;
    case kern::DType::F16: return CUDA_R_16F;
    case kern::DType::BF16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

}  // namespace

// The step program's GEMMs on cuBLAS, called directly on raw pointers (no at::Tensor per call): row-major
// y[M, N] = x[M, K] w[N, K]^T is column-major y^T = w^T x^T, i.e. cublasGemmEx(op(w) = T, op(x) = N, m = N, n = M).
// fp32 accumulation (CUBLAS_COMPUTE_32F) with the default math mode, so no TF32 for fp32 and no reduced-precision
// split-K reductions for 16-bit. A bias is broadcast into y first and the GEMM adds onto it (beta = 1): one rounding
// of acc + bias to the dtype, as the LinearArgs contract and at::addmm have (a bias-add kernel after the GEMM would
// round twice in 16-bit). Nothing here runs under the SIMT emulation: a wrong argument shows on the first GPU run
// as a self-check mismatch (docs/gpu.md section 1), which then falls back to the ATen forward.
class CublasLinear final : public StepLinear {
 public:
  cudaError_t linear(const kern::LinearArgs& a, cudaStream_t s) override {
    if (a.bias) {
      const cudaError_t e = kern::launch_broadcast_row(a.dt, a.M, a.N, a.bias, a.y, a.ldy, s);
      if (e != cudaSuccess) return e;
    }
    cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();  // ATen's per-device handle and graph-safe workspace
    status = cublasSetStream(h, s);
    if (status != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
    cublasMath_t mode;
    status = cublasGetMathMode(h, &mode);
    if (status != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
    status = cublasSetMathMode(h, a.dt == kern::DType::F32 ? CUBLAS_DEFAULT_MATH
                                                           : CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
    if (status != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
    const float alpha = 1.f, beta = a.bias ? 1.f : 0.f;
    const cudaDataType_t t = cuda_type(a.dt);
    status = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, a.N, a.M, a.K, &alpha, a.w, t, int(a.ldw), a.x, t, int(a.ldx),
                          &beta, a.y, t, int(a.ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    const cublasStatus_t restore = cublasSetMathMode(h, mode);  // ATen's setting for its own GEMMs
    if (status == CUBLAS_STATUS_SUCCESS) status = restore;
    return status == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
  }
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;  // the last cuBLAS call's, for the error message
};

// The batch-invariant GEMM (kernels/gemm_rows.h): every output reduced over k in one order whatever M, so a
// token's logits do not depend on the step's bucket (the default, --cuda-gemm fixed).
class FixedLinear final : public StepLinear {
 public:
  cudaError_t linear(const kern::LinearArgs& a, cudaStream_t s) override { return kern::launch_linear_fixed(a, s); }
};

std::string CudaForward::unsupported_reason(const ModelConfig& c, at::ScalarType dt) {
  const std::string why = cuda_kernels_unsupported_reason(c, dt == at::kFloat ? 4 : 2);
  if (!why.empty()) return why;  // including the architecture features the kernels lack (cuda_support.h)
  return "";
}

CudaForward::CudaForward(const CudaModelRefs& refs, bool graphs, bool fixed_gemm)
    : m_(refs), graphs_(graphs), dev_(refs.embed.device()) {
  const ModelConfig& c = *m_.cfg;
  LA_CHECK(dev_.is_cuda(), "CUDA forward on a ", dev_, " model");
  const std::string why = unsupported_reason(c, m_.dtype);
  LA_CHECK(why.empty(), "--kernels on: ", why);
  H_ = c.hidden;
  Hq_ = c.heads;
  Hkv_ = c.kv_heads;
  D_ = c.head_dim;
  Q_ = Hq_ * D_;
  KV_ = Hkv_ * D_;
  W_ = Q_ + 2 * KV_;
  I_ = c.intermediate;
  V_ = c.vocab;
  layers_ = c.layers;
  c10::InferenceMode ng;
  c10::cuda::CUDAGuard guard(dev_);
  const auto o = at::TensorOptions().dtype(m_.dtype).device(dev_);
  const auto oi = at::TensorOptions().dtype(at::kInt).device(dev_);
  const int R = kMaxRows;
  x_ = at::zeros({R, H_}, o);
  h_ = at::zeros({R, H_}, o);
  a_ = at::zeros({R, H_}, o);
  qkv_ = at::zeros({R, W_}, o);
  attn_ = at::zeros({R, Hq_, D_}, o);
  gu_ = at::zeros({R, 2 * int64_t(I_)}, o);
  act_ = at::zeros({R, int64_t(I_)}, o);
  logits_ = at::zeros({R, int64_t(V_)}, o);
  am_ = at::zeros({R}, oi);
  const PaddedStepLayout big = padded_step_layout(R);
  dstep_ = at::zeros({big.words}, oi);
  dcommit_ = at::zeros({R}, oi);
  // Attention partials: splits of split_keys_ key positions, a constant of the model (batch invariance), at most 16
  // of them up to the largest cache (max_positions + 256 rows) plus a step, for the largest step.
  split_keys_ = kern::attn_split_keys(int64_t(c.max_positions) + 256 + R);
  ws_ = at::zeros({int64_t(kern::step_attention_workspace_bytes(R, Hq_, D_, 16)) + 256}, o.dtype(at::kByte));
  const auto pinned = at::TensorOptions().dtype(at::kInt).pinned_memory(true);
  hstep_ = at::zeros({big.words}, pinned);
  hout_ = at::zeros({R}, pinned);
  hcommit_ = at::zeros({R}, pinned);
  const BatchStepLayout bl = batch_step_layout(R, layers_);
  dbstep_ = at::zeros({bl.words}, oi);
  hbstep_ = at::zeros({bl.words}, pinned);
  bslots_.reserve(kMaxBatchSlots);
  // Every slot's cache rows (capacity) stay within the context + 256 rows of step slack (TorchLlama's growth
  // bound), so with split_keys_ above the splits of a batched step stay within the workspace's 16.
  max_batch_cache_rows_ = c.max_positions + 256;
  sd_.dt = kdtype(m_.dtype);
  sd_.H = H_;
  sd_.Hq = Hq_;
  sd_.Hkv = Hkv_;
  sd_.D = D_;
  sd_.I = I_;
  sd_.V = V_;
  sd_.layers = layers_;
  sd_.eps = float(c.rms_eps);
  sd_.split_keys = split_keys_;
  sw_.embed = wptr(m_.embed);
  sw_.norm = wptr(m_.norm);
  sw_.lm_head = wptr(m_.lm_head);
  LA_CHECK(m_.inv_freq.scalar_type() == at::kFloat, "CUDA forward: inv_freq is not fp32");
  sw_.inv_freq = static_cast<const float*>(wptr(m_.inv_freq));
  for (const CudaLayerRefs& w : m_.layers)
    sw_.layers.push_back({wptr(w.ln1), wptr(w.wqkv), wptr(w.bqkv), wptr(w.wo), wptr(w.bo), wptr(w.ln2), wptr(w.wgu),
                          wptr(w.wd)});
  sb_.rows = R;
  sb_.x = x_.data_ptr();
  sb_.h = h_.data_ptr();
  sb_.a = a_.data_ptr();
  sb_.qkv = qkv_.data_ptr();
  sb_.attn = attn_.data_ptr();
  sb_.gu = gu_.data_ptr();
  sb_.act = act_.data_ptr();
  sb_.logits = logits_.data_ptr();
  sb_.argmax = am_.data_ptr<int32_t>();
  sb_.step = dstep_.data_ptr<int32_t>();
  sb_.workspace = ws_.data_ptr();
  sb_.workspace_bytes = size_t(ws_.numel());
  if (fixed_gemm) lin_ = std::make_unique<FixedLinear>();
  else lin_ = std::make_unique<CublasLinear>();
  rebuild_cache_table();
  // One capture stream for the model's life, made (and its lazy driver state touched) now rather than at the first
  // capture: every bucket's graph is captured on the same stream.
  capture_stream_.emplace(c10::cuda::getStreamFromPool(false, dev_.index()));
  ck(cudaStreamSynchronize(capture_stream_->stream()), "capture stream");
}

void CudaForward::rebuild_cache_table() {
  std::vector<int64_t> p;
  sc_.k.clear();
  sc_.v.clear();
  for (int l = 0; l < layers_; ++l) {
    const at::Tensor& kc = (*m_.kc)[l];
    const at::Tensor& vc = (*m_.vc)[l];
    LA_CHECK(kc.is_contiguous() && vc.is_contiguous(), "CUDA forward: the KV cache is not contiguous");
    sc_.k.push_back(kc.data_ptr());
    sc_.v.push_back(vc.data_ptr());
    p.push_back(reinterpret_cast<int64_t>(kc.data_ptr()));
    p.push_back(reinterpret_cast<int64_t>(vc.data_ptr()));
  }
  sc_.rows = int((*m_.kc)[0].size(0));
  table_ = at::tensor(p, at::TensorOptions().dtype(at::kLong)).to(dev_);
}

void CudaForward::cache_changed() {
  c10::cuda::CUDAGuard guard(dev_);
  ck(cudaStreamSynchronize(cur_stream(dev_)), "synchronise before dropping graphs");
  graphs_by_rows_.clear();
  seen_.clear();
  batch_graphs_.clear();
  batch_seen_.clear();
  have_pool_ = false;  // the pool went with its graphs
  rebuild_cache_table();
}

void CudaForward::enqueue(int R, const PaddedStepLayout& lay) {
  LA_CHECK(lay.rows == R, "CUDA forward: step layout of ", lay.rows, " rows for a bucket of ", R);
  const StepStatus st = enqueue_step(sd_, sw_, sb_, sc_, lay, *lin_, cur_stream(dev_));
  if (st.ok()) return;
  if (auto* cub = dynamic_cast<CublasLinear*>(lin_.get()); cub && cub->status != CUBLAS_STATUS_SUCCESS)
    fail("CUDA forward: ", st.what, ": cuBLAS: ", cublasGetStatusString(cub->status));
  ck(st.err, st.what);
}

void CudaForward::run(const StepInput& in, int L, int cache_rows, int first_output) {
  const int T = static_cast<int>(in.tokens.size());
  const int R = step_bucket(T);
  LA_CHECK(R > 0 && R <= kMaxRows, "CUDA forward: step of ", T, " tokens exceeds ", kMaxRows);
  LA_CHECK(L + R <= cache_rows, "CUDA forward: cache of ", cache_rows, " rows cannot take ", R, " rows at ", L);
  c10::InferenceMode ng;
  c10::cuda::CUDAGuard guard(dev_);
  PaddedStepLayout lay = padded_step_layout(R);
  // The previous step ended with a synchronisation, so its copy out of hstep_ has completed.
  fill_padded_step(in.tokens, in.positions, in.parents, L, first_output, lay, hstep_.data_ptr<int32_t>());
  const cudaStream_t s = cur_stream(dev_);
  ck(cudaMemcpyAsync(dstep_.data_ptr<int32_t>(), hstep_.data_ptr<int32_t>(), size_t(lay.words) * 4,
                     cudaMemcpyHostToDevice, s),
     "step upload");
  ++counters_.steps;
  launch(graphs_by_rows_, seen_, graph_key(lay), [&] { enqueue(R, lay); });
}

template <class F>
void CudaForward::launch(std::map<int, std::unique_ptr<at::cuda::CUDAGraph>>& graphs, std::map<int, int>& seen, int key,
                         F&& enqueue_fn) {
  const cudaStream_t s = cur_stream(dev_);
  if (!graphs_) {
    enqueue_fn();
    ++counters_.eager;
    return;
  }
  auto it = graphs.find(key);
  if (it == graphs.end()) {
    if (seen[key]++ == 0) {  // warm-up
      enqueue_fn();
      ++counters_.eager;
      return;
    }
    auto g = std::make_unique<at::cuda::CUDAGraph>();
    ck(cudaStreamSynchronize(s), "synchronise before capture");
    {
      c10::cuda::CUDAStreamGuard sg(*capture_stream_);  // c10's current stream is the capturing one in here
      g->capture_begin(have_pool_ ? pool_ : c10::MempoolId_t{0, 0});
      try {
        enqueue_fn();
      } catch (...) {
        try {
          g->capture_end();
        } catch (...) {
        }
        (void)cudaGetLastError();
        throw;
      }
      g->capture_end();
    }
    if (!have_pool_) {
      pool_ = g->pool();
      have_pool_ = true;
    }
    ++counters_.captures;
    it = graphs.emplace(key, std::move(g)).first;
  }
  it->second->replay();  // on the caller's current stream, after the step upload
  ++counters_.replays;
}

void CudaForward::enqueue_batch(const BatchStepLayout& lay) {
  StepBuffers b = sb_;
  b.step = dbstep_.data_ptr<int32_t>();
  const StepStatus st = enqueue_batch_step(sd_, sw_, b, lay, max_batch_cache_rows_, *lin_, cur_stream(dev_));
  if (st.ok()) return;
  if (auto* cub = dynamic_cast<CublasLinear*>(lin_.get()); cub && cub->status != CUBLAS_STATUS_SUCCESS)
    fail("CUDA forward: ", st.what, ": cuBLAS: ", cublasGetStatusString(cub->status));
  ck(st.err, st.what);
}

void CudaForward::run_batch(const Slot* slots, int n) {
  LA_CHECK(n >= 1 && n <= kMaxBatchSlots, "CUDA forward: batched step of ", n, " slots (at most ", kMaxBatchSlots,
           ")");
  bslots_.resize(n);  // capacity reserved in the constructor
  int total = 0;
  for (int i = 0; i < n; ++i) {
    const Slot& sl = slots[i];
    const int T = static_cast<int>(sl.in->tokens.size());
    LA_CHECK(int(sl.caches->k.size()) == layers_ && int(sl.caches->v.size()) == layers_,
             "CUDA forward: slot ", i, " has no cache of this model");
    LA_CHECK(sl.len + T <= sl.caches->rows && sl.len + T <= max_batch_cache_rows_, "CUDA forward: slot ", i,
             " of ", T, " tokens at ", sl.len, " exceeds its cache of ", sl.caches->rows, " rows");
    BatchSlotStep& b = bslots_[i];
    b.tokens = sl.in->tokens.data();
    b.positions = sl.in->positions.data();
    b.parents = sl.in->parents.data();
    b.T = T;
    b.cache_len = sl.len;
    b.cache_rows = sl.caches->rows;
    b.k = sl.caches->k.data();
    b.v = sl.caches->v.data();
    b.first_output = sl.first_output;
    total += T;
  }
  const int R = step_bucket(total);
  LA_CHECK(R > 0 && R <= kMaxRows, "CUDA forward: batched step of ", total, " tokens exceeds ", kMaxRows);
  c10::InferenceMode ng;
  c10::cuda::CUDAGuard guard(dev_);
  BatchStepLayout lay = batch_step_layout(R, layers_);
  // The previous step ended with a synchronisation, so its copy out of hbstep_ has completed.
  fill_batch_step(bslots_.data(), n, layers_, lay, hbstep_.data_ptr<int32_t>());
  ck(cudaMemcpyAsync(dbstep_.data_ptr<int32_t>(), hbstep_.data_ptr<int32_t>(), size_t(lay.words) * 4,
                     cudaMemcpyHostToDevice, cur_stream(dev_)),
     "batched step upload");
  ++counters_.steps;
  launch(batch_graphs_, batch_seen_, graph_key(lay.step), [&] { enqueue_batch(lay); });
}

const int32_t* CudaForward::argmax_to_host(int n) {
  c10::cuda::CUDAGuard guard(dev_);
  const cudaStream_t s = cur_stream(dev_);
  if (n > 0)
    ck(cudaMemcpyAsync(hout_.data_ptr<int32_t>(), am_.data_ptr<int32_t>(), size_t(n) * 4, cudaMemcpyDeviceToHost, s),
       "argmax download");
  ck(cudaStreamSynchronize(s), "step");
  return hout_.data_ptr<int32_t>();
}

void CudaForward::commit(const std::vector<int32_t>& idx, int L) {
  const int m = static_cast<int>(idx.size());
  LA_CHECK(m <= kMaxRows, "CUDA forward: commit of ", m, " rows");
  c10::cuda::CUDAGuard guard(dev_);
  const cudaStream_t s = cur_stream(dev_);
  // hcommit_ was last read by the previous commit's copy, which a forward's synchronisation has since waited for.
  std::memcpy(hcommit_.data_ptr<int32_t>(), idx.data(), size_t(m) * 4);
  ck(cudaMemcpyAsync(dcommit_.data_ptr<int32_t>(), hcommit_.data_ptr<int32_t>(), size_t(m) * 4,
                     cudaMemcpyHostToDevice, s),
     "commit upload");
  ck(kern::launch_kv_commit(kdtype(m_.dtype), 2 * layers_, reinterpret_cast<void* const*>(table_.data_ptr<int64_t>()),
                            KV_, L, dcommit_.data_ptr<int32_t>(), m, s),
     "kv_commit");
}

}  // namespace la
#endif  // LOOKAHEAD_WITH_CUDA
