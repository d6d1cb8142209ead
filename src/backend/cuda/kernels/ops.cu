// Fused element-wise kernels: RMSNorm (+ residual add), RoPE, SwiGLU.
#include <initializer_list>
#include <utility>

#include "common.cuh"
#include "ops.h"

namespace la::kern {
namespace detail {
namespace {

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float part[32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // part[] may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < nw ? part[lane] : 0.f;
  return warp_sum(v);
}

// No __restrict__: residual_out may alias x or residual, out may alias x. Each element is read and written by
// the same thread, in order.
template <class E, int V>
__global__ void rms_norm_kernel(int H, const E* x, int64_t xs, const E* res, int64_t rs, E* rout, int64_t ros,
                                const E* w, float eps, E* out, int64_t os) {
  const int64_t row = blockIdx.x;
  const E* xr = x + row * xs;
  const E* rr = res ? res + row * rs : nullptr;
  E* ror = rout ? rout + row * ros : nullptr;
  E* orow = out + row * os;
  float ss = 0.f;
  for (int i = threadIdx.x * V; i < H; i += blockDim.x * V) {
    float a[V];
    load_f<E, V>(xr + i, a);
    if (rr) {
      float b[V];
      load_f<E, V>(rr + i, b);
#pragma unroll
      for (int k = 0; k < V; ++k) a[k] = round_to<E>(a[k] + b[k]);
      if (ror) store_f<E, V>(ror + i, a);
    }
#pragma unroll
    for (int k = 0; k < V; ++k) ss = fmaf(a[k], a[k], ss);
  }
  const float r = rsqrtf(block_sum(ss) / float(H) + eps);
  for (int i = threadIdx.x * V; i < H; i += blockDim.x * V) {
    float a[V], wv[V];
    if (ror) {
      load_f<E, V>(ror + i, a);
    } else {
      load_f<E, V>(xr + i, a);
      if (rr) {
        float b[V];
        load_f<E, V>(rr + i, b);
#pragma unroll
        for (int k = 0; k < V; ++k) a[k] = round_to<E>(a[k] + b[k]);
      }
    }
    load_f<E, V>(w + i, wv);
#pragma unroll
    for (int k = 0; k < V; ++k) a[k] = wv[k] * round_to<E>(a[k] * r);
    store_f<E, V>(orow + i, a);
  }
}

// One block per token: cos/sin of the token's D/2 angles in shared memory, then every (head, i) pair.
template <class E>
__global__ void rope_kernel(int D, const int32_t* __restrict__ pos, const float* __restrict__ inv_freq, float attn_scale,
                            E* q, int Hq, int64_t qst, int64_t qsh, E* k, int Hk, int64_t kst, int64_t ksh) {
  LA_DYNAMIC_SMEM(float, cs, 16);  // [half] cos, [half] sin
  const int t = blockIdx.x, half = D / 2;
  const float p = float(pos[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(p * inv_freq[i], &s, &c);
    cs[i] = round_to<E>(c * attn_scale);
    cs[half + i] = round_to<E>(s * attn_scale);
  }
  __syncthreads();
  const int total = (Hq + Hk) * half;
  for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
    const int h = idx / half, i = idx - h * half;
    E* base = h < Hq ? q + int64_t(t) * qst + int64_t(h) * qsh : k + int64_t(t) * kst + int64_t(h - Hq) * ksh;
    const float x1 = to_f(base[i]), x2 = to_f(base[i + half]);
    const float c = cs[i], s = cs[half + i];
    // HF: x * cos + rotate_half(x) * sin, each op rounded to the dtype.
    base[i] = from_f<E>(round_to<E>(x1 * c) + round_to<E>(-x2 * s));
    base[i + half] = from_f<E>(round_to<E>(x2 * c) + round_to<E>(x1 * s));
  }
}

template <class E, int V>
__global__ void swiglu_kernel(int I, const E* g, int64_t gs, const E* u, int64_t us, E* o, int64_t os) {
  const int64_t t = blockIdx.y;
  const int i = (blockIdx.x * blockDim.x + threadIdx.x) * V;
  if (i >= I) return;
  float a[V], b[V];
  load_f<E, V>(g + t * gs + i, a);
  load_f<E, V>(u + t * us + i, b);
#pragma unroll
  for (int k = 0; k < V; ++k) a[k] = round_to<E>(a[k] / (1.f + expf(-a[k]))) * b[k];
  store_f<E, V>(o + t * os + i, a);
}

// out[r] = src[ids ? ids[r] : 0] (a row of zeros for an id outside [0, n_src)); W is the element's bit pattern.
template <class W>
__global__ void gather_rows_kernel(int N, const int32_t* __restrict__ ids, int n_src, const W* __restrict__ src,
                                   int64_t ss, W* __restrict__ out, int64_t os) {
  const int64_t r = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  const int id = ids ? ids[r] : 0;
  out[r * os + i] = (id >= 0 && id < n_src) ? src[int64_t(id) * ss + i] : W(0);
}

cudaError_t launch_gather_rows(size_t es, int rows, int N, const int32_t* ids, int n_src, const void* src,
                               int64_t ss, void* out, int64_t os, cudaStream_t stream) {
  if (rows < 0 || N <= 0 || (rows > 0 && (!src || !out))) return cudaErrorInvalidValue;
  const int threads = 256;
  for (int r0 = 0; r0 < rows; r0 += 65535) {  // grid.y limit
    const int n = rows - r0 < 65535 ? rows - r0 : 65535;
    const dim3 grid((N + threads - 1) / threads, n);
    const int32_t* id = ids ? ids + r0 : nullptr;
    if (es == 4)
      LA_LAUNCH(grid, threads, 0, stream, gather_rows_kernel<uint32_t>)(
          N, id, n_src, static_cast<const uint32_t*>(src), ss, static_cast<uint32_t*>(out) + int64_t(r0) * os, os);
    else
      LA_LAUNCH(grid, threads, 0, stream, gather_rows_kernel<uint16_t>)(
          N, id, n_src, static_cast<const uint16_t*>(src), ss, static_cast<uint16_t*>(out) + int64_t(r0) * os, os);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

bool vec_ok(size_t es, int n, std::initializer_list<std::pair<const void*, int64_t>> rows) {
  const int v = int(16 / es);
  if (n % v) return false;
  for (auto [p, st] : rows)
    if (p && (!aligned16(p) || (st * int64_t(es)) % 16)) return false;
  return true;
}

int block_threads(int work) {  // a multiple of 32 in [32, 256] covering `work` if possible
  int t = (work + 31) / 32 * 32;
  return t < 32 ? 32 : (t > 256 ? 256 : t);
}

}  // namespace
}  // namespace detail

cudaError_t launch_rms_norm(DType dt, int rows, int H, const void* x, int64_t x_stride, const void* residual,
                            int64_t residual_stride, void* residual_out, int64_t residual_out_stride,
                            const void* weight, float eps, void* out, int64_t out_stride, cudaStream_t stream) {
  using namespace detail;
  if (rows < 0 || H <= 0 || (rows > 0 && (!x || !weight || !out))) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const size_t es = dtype_size(dt);
  const bool vec = vec_ok(es, H,
                          {{x, x_stride}, {residual, residual_stride}, {residual_out, residual_out_stride},
                           {weight, 0}, {out, out_stride}});
  return dispatch_dtype(dt, [&](auto tag) {
    using E = decltype(tag);
    constexpr int VV = 16 / sizeof(E);
    const E* xe = static_cast<const E*>(x);
    const E* re = static_cast<const E*>(residual);
    E* roe = static_cast<E*>(residual_out);
    const E* we = static_cast<const E*>(weight);
    E* oe = static_cast<E*>(out);
    if (vec)
      LA_LAUNCH(rows, block_threads(H / VV), 0, stream, rms_norm_kernel<E, VV>)(H, xe, x_stride, re, residual_stride, roe,
                                                                          residual_out_stride, we, eps, oe, out_stride);
    else
      LA_LAUNCH(rows, block_threads(H), 0, stream, rms_norm_kernel<E, 1>)(H, xe, x_stride, re, residual_stride, roe,
                                                                    residual_out_stride, we, eps, oe, out_stride);
    return cudaGetLastError();
  });
}

cudaError_t launch_rope(DType dt, int T, int D, const int32_t* positions, const float* inv_freq, float attn_scale,
                        void* q, int Hq, int64_t q_stride_t, int64_t q_stride_h, void* k, int Hk,
                        int64_t k_stride_t, int64_t k_stride_h, cudaStream_t stream) {
  using namespace detail;
  if (T < 0 || D <= 0 || D % 2 || Hq < 0 || Hk < 0 || (k == nullptr && Hk > 0)) return cudaErrorInvalidValue;
  if (T == 0 || Hq + Hk == 0) return cudaSuccess;
  if (!positions || !inv_freq || (Hq > 0 && !q)) return cudaErrorInvalidValue;
  const size_t smem = size_t(D) * sizeof(float);
  if (smem > 48 * 1024) return cudaErrorInvalidValue;
  return dispatch_dtype(dt, [&](auto tag) {
    using E = decltype(tag);
    LA_LAUNCH(T, block_threads((Hq + Hk) * D / 2), smem, stream, rope_kernel<E>)(
        D, positions, inv_freq, attn_scale, static_cast<E*>(q), Hq, q_stride_t, q_stride_h, static_cast<E*>(k), Hk,
        k_stride_t, k_stride_h);
    return cudaGetLastError();
  });
}

cudaError_t launch_swiglu(DType dt, int T, int I, const void* gate, int64_t gate_stride, const void* up,
                          int64_t up_stride, void* out, int64_t out_stride, cudaStream_t stream) {
  using namespace detail;
  if (T < 0 || I <= 0 || (T > 0 && (!gate || !up || !out))) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  const size_t es = dtype_size(dt);
  const bool vec = vec_ok(es, I, {{gate, gate_stride}, {up, up_stride}, {out, out_stride}});
  return dispatch_dtype(dt, [&](auto tag) {
    using E = decltype(tag);
    constexpr int VV = 16 / sizeof(E);
    const int threads = 256;
    const E* g = static_cast<const E*>(gate);
    const E* u = static_cast<const E*>(up);
    E* o = static_cast<E*>(out);
    for (int t0 = 0; t0 < T; t0 += 65535) {  // grid.y limit
      const int n = T - t0 < 65535 ? T - t0 : 65535;
      const E* gt = g + int64_t(t0) * gate_stride;
      const E* ut = u + int64_t(t0) * up_stride;
      E* ot = o + int64_t(t0) * out_stride;
      if (vec) {
        const dim3 grid((I / VV + threads - 1) / threads, n);
        LA_LAUNCH(grid, threads, 0, stream, swiglu_kernel<E, VV>)(I, gt, gate_stride, ut, up_stride, ot, out_stride);
      } else {
        const dim3 grid((I + threads - 1) / threads, n);
        LA_LAUNCH(grid, threads, 0, stream, swiglu_kernel<E, 1>)(I, gt, gate_stride, ut, up_stride, ot, out_stride);
      }
      const cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  });
}

cudaError_t launch_embed_rows(DType dt, int rows, int N, const int32_t* ids, int vocab, const void* table,
                              int64_t table_stride, void* out, int64_t out_stride, cudaStream_t stream) {
  if (rows > 0 && !ids) return cudaErrorInvalidValue;
  return detail::launch_gather_rows(dtype_size(dt), rows, N, ids, vocab, table, table_stride, out, out_stride, stream);
}

cudaError_t launch_broadcast_row(DType dt, int rows, int N, const void* row, void* out, int64_t out_stride,
                                 cudaStream_t stream) {
  return detail::launch_gather_rows(dtype_size(dt), rows, N, nullptr, 1, row, 0, out, out_stride, stream);
}

}  // namespace la::kern
