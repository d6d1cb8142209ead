// The greedy LM head without every logit: an int8 sketch of the head's rows bounds every logit, and only the rows
// whose bound reaches the best lower bound are computed exactly, so the argmax is the full head's, bit for bit.
//
// Why: a greedy step reads nothing of the logits but their argmax, yet the head is the largest matrix a step reads
// (SmolLM2-135M in fp32: 49152 x 576, 113 MB of a 540 MB step, a fifth of a one-row forward). Its int8 sketch is
// a quarter of those bytes. No library offers an exact pruned argmax over a quantized proxy; written here.
//
// The sketch (built once at load, shared by every fork): per row n and group g of 32 k, a scale s[n][g] = max|w| /
// 127 (fp32) and codes c = round(w / s) in [-127, 127]; and a bound coefficient beta[n][g] (below). A step's row x
// is quantized per group the same way (t[g] = max|x| in g / 127, q = round(x / t)), and
//   a[n] = sum_g s[n][g] t[g] I[n][g],   I[n][g] = sum_{k in g} c[n][k] q[k]  (exact int32: at most 32 x 127 x 127)
//   B[n] = sum_g m[g] beta[n][g],        m[g] = max |x| in group g
// with beta[n][g] = E + L1' (0.5001 / 127 + gamma(G + 8) 1.01) + gamma(K) L1, each term summed in double and
// rounded up: E = sum |w - s c| (the sketch's error), L1' = sum |s c|, L1 = sum |w| over the group; gamma(j) = j u
// / (1 - j u), u = 2^-24. Then |y[n] - a[n]| <= B[n] for y[n] the GEMM's own fp32 logit (gemm.h: s = fma(w, x, s)
// for k in order): the three terms bound, in turn, the weights' quantization, the activations' (|x - t q| <=
// 0.5001 t) together with a[n]'s own rounding (at most G + 8 roundings of terms whose magnitudes sum to at most
// 1.01 sum_g m[g] L1'), and the fp32 fma chain's rounding against the real dot product. beta is inflated by 1e-4
// for B's own fp32 rounding (G + 8 < 800 is required: K < 25600), and a -+ B is formed in double with a 2^-50
// relative slack.
//
// The argmax: lo = max over n of a[n] - B[n]; every row with a[n] + B[n] >= lo is a candidate, its logit computed
// exactly as the GEMM does (the same fma chain, same bits); the answer is the candidates' argmax with the rule of
// CpuForward::argmax (first NaN, else first maximum). A non-candidate's logit is < lo <= the logit of the row that
// gave lo, so it can neither be the maximum nor tie with it: the answer is the full head's argmax. Rows with
// non-finite weights are always candidates (sketched as nothing). The sketch declines (returns false; the caller
// runs the full head) when x is not finite or max|x| x max_n L1(w_n) could overflow an fp32 partial sum.
//
// When it pays: the sketch reads a quarter (fp32) or five eighths (bf16, fp16) of the head's bytes but costs about
// twice the float GEMM's arithmetic per token row (sign, maddubs, madd, convert, scale per 32 k against four FMAs),
// so it wins while the head is memory-bound. `bench-forward --context 128`, SmolLM2-135M, 2 threads, the 2-core
// EPYC, with and without it (LOOKAHEAD_HEAD_SKETCH=off), 2 runs each: fp32 1 row 10.3-10.5 against 12.4-12.9 ms, 4
// rows 15.0 against 16.7-17.2, 6 rows even, 8 rows 17.0-17.3 against 15.0-15.9; bf16 1 row 7.1-7.3 against
// 7.7-8.2, 2 rows 8.3-9.4 against 9.1-9.2, 4 rows 7.7-8.4 against 6.8-7.2. So fp32 heads use it up to 4 output
// rows, bf16 and fp16 heads up to 2 (a plain step of up to 4 or 2 requests; draft steps have more rows). Which
// path a step takes changes no id.
//
// Batch invariance: each token row's answer is the exact argmax of its own logits, whatever M, the thread count
// or the ISA path (AVX2 maddubs or portable scalar: their a[n] may differ in the last bits, both within B[n]).
#pragma once
#include <cstdint>
#include <vector>

#include "lookahead/backend/cpu/gemm.h"

namespace la {

class ThreadPool;

struct HeadSketch {
  int rows = 0, cols = 0;      // V, K (K % 32 == 0)
  int groups = 0, gpad = 0;    // G = K / 32; G padded to a multiple of 8 (zero betas)
  std::vector<int8_t> codes;   // [V][K]
  std::vector<float> scale;    // [V][G]
  std::vector<float> beta;     // [V][gpad]
  std::vector<uint8_t> always; // [V]: 1 for a row with non-finite weights (always a candidate)
  double max_l1 = 0;           // max over finite rows of sum |w|
  int max_rows = 0;            // steps of at most this many output rows use it (below)
  size_t bytes() const { return codes.size() + 4 * (scale.size() + beta.size()) + always.size(); }
};

// Whether a head can be sketched: float panels (fp32, bf16, fp16), K a multiple of 32 below 25600.
bool head_sketch_supports(const PackedWeight& w);
// The sketch of a float-panel head (head_sketch_supports), built over the pool's threads.
HeadSketch build_head_sketch(ThreadPool& pool, const PackedWeight& w);

// Per-step buffers (kept: a step allocates nothing once the largest M has run).
struct SketchScratch {
  std::vector<float> a, b;           // [M][V]
  std::vector<int8_t> q;             // [M][2K] activation codes, then their absolute values
  std::vector<float> m, t;           // [M][gpad] group maxima, [M][G] group scales
  std::vector<double> lo;            // [threads][M] each participant's best lower bound
  std::vector<int32_t> best;         // [threads][M] each participant's argmax among its candidates (-1: none)
  std::vector<float> best_v;         // [threads][M] its value
  std::vector<int32_t> cands;        // [threads][M] candidates each participant computed exactly
};

// out[t] = argmax over n of row t of x[M, K] W^T (W the head the sketch was built from), the full GEMM's argmax
// exactly; false (out untouched) when the sketch declines (above).
bool sketch_argmax(ThreadPool& pool, const HeadSketch& s, const PackedWeight& w, const float* x, int M, int32_t* out,
                   SketchScratch& scratch);

}  // namespace la
