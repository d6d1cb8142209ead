// SIMT emulation stand-in for WMMA (m16n16k16 only, as the kernels use it). A fragment holds the whole tile in
// every lane (the documented semantics, not the hardware's distribution over lanes); load/store are warp
// collectives (barriers on entry and exit; one lane stores), mma accumulates in fp32 with sequential FMAs over k
// (tensor cores may sum in another order: real rounding is not emulated). Asserts 256-bit aligned pointers and an
// ldm that is a multiple of 16 bytes, as the CUDA programming guide requires.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "simt.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulation covers m16n16k16");
  float v[16 * 16];  // [row][col] of the fragment's matrix (A: m x k, B: k x n, C: m x n)
};

namespace detail {
inline float to_f(float x) { return x; }
inline float to_f(__half x) { return __half2float(x); }
inline float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T>
void check(const void* p, unsigned ldm, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 32)
    ::la_simt::report(std::string("wmma::") + what + ": pointer not 256-bit aligned");
  if ((ldm * sizeof(T)) % 16) ::la_simt::report(std::string("wmma::") + what + ": ldm not a multiple of 16 bytes");
}
// Element (r, c) of a 16x16 matrix stored row-major (ld between rows) or column-major.
template <class T>
void load(float* v, const T* p, unsigned ldm, bool row_major_mem) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) v[r * 16 + c] = to_f(row_major_mem ? p[r * ldm + c] : p[c * ldm + r]);
}
}  // namespace detail

template <class Use, class T, class L>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, L>& f, const T* p, unsigned ldm) {
  ::la_simt::syncwarp();
  detail::check<T>(p, ldm, "load_matrix_sync");
  detail::load(f.v, p, ldm, std::is_same_v<L, row_major>);
  ::la_simt::syncwarp();
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t l) {
  ::la_simt::syncwarp();
  detail::check<float>(p, ldm, "load_matrix_sync");
  detail::load(f.v, p, ldm, l == mem_row_major);
  ::la_simt::syncwarp();
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t l) {
  ::la_simt::syncwarp();
  detail::check<float>(p, ldm, "store_matrix_sync");
  if (::la_simt::lane_id() == 0)
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c) (l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.v[r * 16 + c];
  ::la_simt::syncwarp();
}
template <class Use, class T, class L>
void fill_fragment(fragment<Use, 16, 16, 16, T, L>& f, float x) {
  for (float& e : f.v) e = x;
}
template <class TA, class LA, class TB, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, TA, LA>& a,
              const fragment<matrix_b, 16, 16, 16, TB, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[16 * 16];
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float s = c.v[m * 16 + n];
      for (int k = 0; k < 16; ++k) s = fmaf(a.v[m * 16 + k], b.v[k * 16 + n], s);
      out[m * 16 + n] = s;
    }
  for (int i = 0; i < 256; ++i) d.v[i] = out[i];
}

}  // namespace nvcuda::wmma
