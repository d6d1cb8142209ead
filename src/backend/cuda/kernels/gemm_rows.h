// Launcher of the fixed-configuration GEMM of a step's rows (gemm_rows.cu); conventions in kernel_types.h, the
// arguments in linear.h.
//
// Why hand-written (cuBLAS exists): cuBLAS chooses its algorithm (tile shape, split-K, stream-K, and so the order
// in which an output element's K products are summed) by the problem shape, M included, and documents no
// configuration that is invariant in M. A step is M = 1..256 rows (its bucket), so through cuBLAS a token's
// logits can change in the last bits with the size of the step it was verified in, and a near tie can flip the
// argmax. This kernel exists for that one property, batch invariance; it is not meant to beat cuBLAS (its speed
// is unmeasured: no GPU here).
//
// How it stays batch-invariant: every output element y[m][n] is computed by one thread (fp32) or one warp's
// tensor-core fragment (fp16/bf16) as ONE fp32 accumulator that runs over k = 0, 1, ..., K-1 in increasing order
// (fp32: one FMA per k; 16-bit: one WMMA m16n16k16 per 16-wide k chunk, chunks in increasing order), then adds
// bias[n] once and rounds to the element type. The tile shape (32 rows x 64 columns, 128 threads; k tiles of 64
// in 16-bit, 32 in fp32) is a compile-time constant per element type, independent of M, of the row's position in
// the step and of the other rows; there is no split-K (the whole K range is reduced by the block that owns the
// output tile), no atomics, no cross-block reduction, and no choice made from M at launch except the grid's
// row-tile count. Rows past M are zero-filled in shared memory and never read by a valid row's accumulator; k past
// K is zero-filled too, adding the same zero products to every row at every M. The vector (cp.async) and the
// scalar (unaligned) load paths put the same values in shared memory, so they give the same bits too.
//
// fp16/bf16 use WMMA (m16n16k16, fp32 accumulators): each element of a fragment's product is a dot product of its
// own row of A and column of B, so it does not depend on the other rows held in the fragment, and the chunks are
// accumulated in a fixed order. The summation order inside one 16-wide chunk is the tensor core's (fixed by the
// hardware, not modelled by the SIMT emulation, which sums sequentially): bit-equality between rows of a step and
// a 1-row step on a GPU rests on that order being the same for every row of a fragment, which the hardware does
// not document. fp32 uses plain FMAs (no TF32), whose order is fully fixed by the source.
//
// Shape: blockIdx.x is the 32-row tile (fastest, so the CTAs reading the same 64 weight rows run together and the
// weight tile comes from L2 after the first read), blockIdx.y the 64-column tile. Weights and activations stream
// through a three-stage cp.async pipeline (two 8 KiB weight tiles in flight per CTA; 16-byte copies when x, w and
// their row strides are 16-byte aligned, else bounds-checked scalar loads); warps whose rows all lie past M skip
// their arithmetic. For decode (M = 1) the cost is one read of the weights with N / 64 CTAs; a narrow N therefore
// uses few SMs (no split-K by design).
#pragma once
#include <cuda_runtime_api.h>

#include "linear.h"

namespace la::kern {

// y = x w^T (+ bias) for dt F32, F16 or BF16 (fp32 accumulation). M, N, K > 0; ldx >= K, ldw >= K, ldy >= N (in
// elements); x, w, y non-null; every pointer aligned to its element size. cudaErrorInvalidValue for bad arguments,
// else the launch error.
cudaError_t launch_linear_fixed(const LinearArgs& a, cudaStream_t s);

}  // namespace la::kern
