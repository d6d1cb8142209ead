// Skinny fp32 GEMM for CPU steps: y = x W^T for a few step tokens (M <= kCpuGemmMaxRows) and a large weight.
//
// Why by hand: a lookahead step multiplies 2-32 token rows by every weight matrix. MKL's sgemm (what at::linear
// calls for M > 1; M = 1 goes to sgemv) re-packs the weight for each call, so on one core of the 2-core dev VM a
// SmolLM2 MLP matrix (1536 x 576) took 0.27 ms for M = 2 against 0.12-0.15 ms for M = 1, and its 49152 x 576 head
// 27-30 ms against 13-14 ms: a 2-token step cost 1.8 plain steps. MKL's packed-weight API (torch's
// mkl::_mkl_linear) and oneDNN's prepacked linear (mkldnn::_linear_pointwise) were measured as well and did not
// close the gap for M <= 8. This kernel streams each weight row once per step and multiplies it with every token
// row while it sits in L1 (4 weight rows x 3 token rows of AVX2 FMA accumulators), so a step of a few tokens costs
// about what reading the weights costs, which is what one token costs.
//
// Every output y[t][n] is summed in the same order (8 lanes over k, then the lanes, then the k % 8 tail) whatever
// M is and wherever row t falls in its block: a token's result does not depend on the other tokens of the step.
#pragma once

namespace la {

constexpr int kCpuGemmMaxRows = 32;

// Whether the kernel beats ATen's linear for M token rows times an [N, K] fp32 weight (measured on the dev VM, one
// thread): always up to 8 rows; up to kCpuGemmMaxRows when the weight does not fit a 1 MiB L2 (SmolLM2's
// matrices: 0.45-0.6 ms vs 0.64-0.7 ms at 16 rows), since a weight that stays in cache makes MKL's packing cheap
// and its blocked kernel faster (stories260K at 16 rows: 1.9 vs 1.6 ms per forward).
inline bool cpu_gemm_pays(int M, long long N, long long K) {
  return M <= 8 || (M <= kCpuGemmMaxRows && N * K * 4 >= (1LL << 20));
}

// True when this CPU runs the kernel (x86-64 with AVX2 and FMA).
bool cpu_gemm_supported();

// y[t * ldy + n] = sum_k x[t * K + k] * w[n * K + k] for t < M and n0 <= n < n1 (w is row-major [N, K]).
// Requires cpu_gemm_supported().
void cpu_gemm_rows(const float* x, int M, int K, const float* w, int n0, int n1, float* y, int ldy);

}  // namespace la
