// Device helpers shared by the kernels (private to la_kernels).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_types.h"

// Kernel launches and the dynamic shared memory go through these two macros so that the same source also compiles
// as host C++ under the SIMT emulation (tests/simt/simt.h defines them there).
#ifndef LA_SIMT
#define LA_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define LA_DYNAMIC_SMEM(T, name, align) extern __shared__ __align__(align) T name[]
#endif

namespace la::kern::detail {

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class E>
__device__ __forceinline__ E from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Rounds to E and back (emulates an op whose result is stored in E).
template <class E>
__device__ __forceinline__ float round_to(float x) { return to_f(from_f<E>(x)); }

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

#ifndef LA_SIMT
// 16-byte async global->shared copy; src_bytes = 0 fills the destination with zeros (src is not read).
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src, int src_bytes) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(gmem_src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
#else
// The SIMT emulation (tests/simt/simt.h): copies that land at wait_group, destinations poisoned until then.
inline void cp_async16(void* smem_dst, const void* gmem_src, int src_bytes) {
  ::la_simt::cp_async16(smem_dst, gmem_src, src_bytes);
}
inline void cp_async_commit() { ::la_simt::cp_async_commit(); }
template <int N>
inline void cp_async_wait() { ::la_simt::cp_async_wait(N); }
#endif

// N consecutive elements loaded/stored as one aligned vector.
template <class E, int N>
struct alignas(sizeof(E) * N) Pack {
  E v[N];
};
template <class E, int N>
__device__ __forceinline__ void load_f(const E* p, float (&out)[N]) {
  const Pack<E, N> pk = *reinterpret_cast<const Pack<E, N>*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_f(pk.v[i]);
}
template <class E, int N>
__device__ __forceinline__ void store_f(E* p, const float (&in)[N]) {
  Pack<E, N> pk;
#pragma unroll
  for (int i = 0; i < N; ++i) pk.v[i] = from_f<E>(in[i]);
  *reinterpret_cast<Pack<E, N>*>(p) = pk;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Dispatches on DType: F(tag) is called with a value of the element type (use decltype).
template <class F>
cudaError_t dispatch_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::F32: return f(float{});
    case DType::F16: return f(__half{});
    case DType::BF16: return f(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace la::kern::detail
