// Element types of the kernel tests under the SIMT emulation: fp32 <-> the stored type (round to nearest) and the
// kernels' dtype tag, shared by test_simt_attention, test_simt_invariance and test_simt_ops.
#pragma once
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "kernel_types.h"

namespace simt_elems {

inline float to_f(float x) { return x; }
inline float to_f(__half x) { return __half2float(x); }
inline float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class E>
E from_f(float x);
template <>
inline float from_f<float>(float x) { return x; }
template <>
inline __half from_f<__half>(float x) { return __float2half_rn(x); }
template <>
inline __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <class E>
la::kern::DType dtype_of();
template <>
inline la::kern::DType dtype_of<float>() { return la::kern::DType::F32; }
template <>
inline la::kern::DType dtype_of<__half>() { return la::kern::DType::F16; }
template <>
inline la::kern::DType dtype_of<__nv_bfloat16>() { return la::kern::DType::BF16; }

}  // namespace simt_elems
