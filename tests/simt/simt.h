// SIMT emulation: runs the kernel sources of src/backend/cuda/kernels/ (the very .cu/.cuh files nvcc compiles) as host C++ on the
// CPU, for tests on machines without a GPU (CTest label simt). The headers in tests/simt/include stand in for
// cuda_runtime.h, cuda_fp16.h, cuda_bf16.h and mma.h; src/backend/cuda/kernels/common.cuh switches its three PTX helpers
// (cp.async) and the launch and dynamic-shared-memory macros on LA_SIMT.
//
// What it emulates:
//  * a block's threads as fibers on one OS thread (entered with setcontext, switched with _setjmp/_longjmp: no
//    system call per switch; plain ucontext under TSan), run until each reaches a barrier; __syncthreads is a
//    block barrier, __syncwarp and every *_sync warp operation a barrier of the warp's live lanes; a barrier that
//    can never complete (divergent __syncthreads) is reported as a deadlock;
//  * warp shuffles (__shfl_xor_sync), __ballot_sync, __any_sync, __all_sync through a per-warp exchange buffer;
//  * cp.async: the source is read at issue, the destination is poisoned (all bits set: NaN in every float type)
//    until the issuing thread's cp.async.wait_group retires its group, so a read before the wait sees NaN;
//  * WMMA m16n16k16 by its documented semantics (fragment load/store as warp-collectives, mma with fp32
//    accumulation), asserting 256-bit aligned pointers and ldm a multiple of 16 bytes;
//  * dynamic shared memory: launches above the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize (48 KiB by
//    default) or the emulated device's opt-in limit (set_device: e.g. 99 KiB for sm_86/89) fail as on a GPU;
//  * bf16/fp16 conversions with round-to-nearest-even (as __float2bfloat16_rn / __float2half_rn);
//  * a shared-memory race detector when built with -fsanitize=thread (test_simt_race): each thread is a
//    ThreadSanitizer fiber, switches do not synchronise, barriers do, so a read and a write (or two writes) of
//    different threads between two barriers are reported (simt.cpp).
//
// What it cannot check: code generation (nvcc's, ptxas' register allocation), the real WMMA fragment layout and
// accumulation order/rounding inside the tensor cores (here: sequential fp32 FMAs), memory-model effects between
// blocks (blocks run one after another) and weaker-than-sequential orderings, timing, occupancy, bank conflicts,
// CUDA graph legality (capture rules), cuBLAS and anything else libtorch launches, and __launch_bounds__/register
// limits (tests/scripts/test_cuda_static.sh reads those from the built objects).
#pragma once
#include <math.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#define LA_SIMT 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)
#define __restrict__ __restrict

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
};
typedef struct CUstream_st* cudaStream_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
cudaError_t cudaGetDevice(int* dev);
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int dev);
cudaError_t cudaFuncSetAttribute(const void* fn, cudaFuncAttribute a, int v);
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t e);

namespace la_simt {

struct Coords {
  uint3 thread, block;
};
extern Coords* g_cur;  // the running fiber's coordinates
Coords& coords();      // *g_cur (read outside the race detector's view)
extern dim3 g_block_dim, g_grid_dim;

// The emulated device: SM count and opt-in shared memory per block (defaults: an H100, 132 SMs, 227 KiB).
void set_device(int sm_count, int smem_optin_bytes);
// Errors found by the emulation since the last call (misaligned WMMA pointers, deadlocks, launch limits), cleared.
std::vector<std::string> take_errors();
void report(const std::string& what);

void syncthreads();
void syncwarp();
// Exchanges 64-bit words among the warp's lanes: writes mine, returns lane `src`'s.
uint64_t warp_exchange(uint64_t mine, int src);
unsigned warp_ballot(bool pred);
int lane_id();
void* dynamic_smem();

// cp.async: read src now, poison dst, land at wait_group.
void cp_async16(void* dst, const void* src, int src_bytes);
void cp_async_commit();
void cp_async_wait(int n);

void run_grid(dim3 grid, dim3 block, size_t smem, const void* fn, void (*body)(void*), void* ctx);

template <class F, class... A>
struct Launch {
  dim3 grid, block;
  size_t smem;
  F* fn;
  template <class... X>
  void operator()(X&&... args) {
    auto call = [&]() { fn(args...); };
    using C = decltype(call);
    run_grid(grid, block, smem, reinterpret_cast<const void*>(fn), [](void* c) { (*static_cast<C*>(c))(); },
             &call);
  }
};
template <class F>
Launch<F> make_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t, F* fn) {
  return Launch<F>{grid, block, smem, fn};
}

template <class T>
T shfl_xor(T v, int mask) {
  static_assert(sizeof(T) <= 8, "shuffle of a word");
  uint64_t w = 0;
  std::memcpy(&w, &v, sizeof(T));
  w = warp_exchange(w, lane_id() ^ mask);
  T r;
  std::memcpy(&r, &w, sizeof(T));
  return r;
}

}  // namespace la_simt

#define threadIdx (::la_simt::coords().thread)
#define blockIdx (::la_simt::coords().block)
#define blockDim (::la_simt::g_block_dim)
#define gridDim (::la_simt::g_grid_dim)

inline void __syncthreads() { ::la_simt::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::la_simt::syncwarp(); }
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask, int = 32) {
  return ::la_simt::shfl_xor(v, mask);
}
inline unsigned __ballot_sync(unsigned, int pred) { return ::la_simt::warp_ballot(pred != 0); }
inline int __any_sync(unsigned, int pred) { return ::la_simt::warp_ballot(pred != 0) != 0; }
inline int __all_sync(unsigned, int pred) { return ::la_simt::warp_ballot(pred != 0) == 0xffffffffu; }
// Bit intrinsics.
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
// CUDA math functions the kernels use that C++ lacks.
inline float rsqrtf(float x) { return 1.f / sqrtf(x); }
// CUDA's global integer min/max.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

#define LA_LAUNCH(grid, block, smem, stream, ...) ::la_simt::make_launch(dim3(grid), dim3(block), smem, stream, &__VA_ARGS__)
#define LA_DYNAMIC_SMEM(T, name, align) T* name = static_cast<T*>(::la_simt::dynamic_smem())
