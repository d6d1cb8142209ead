// Run-time ISA dispatch for the CPU kernels (llama.cpp's ggml CPU backend does the same): every kernel has a
// portable C++ path and, on x86-64, an AVX2+FMA+F16C path chosen when this CPU has those instructions. On a CPU
// with AVX-512F (and an OS that saves its registers), the avx512 path is the AVX2 path with the fp32 GEMM's
// compute-bound tiles (4 rows and more) in 16-lane registers (gemm.cpp); every other kernel runs its AVX2 form.
// The AVX-512 tiles are tested wherever the tests run on such a CPU (the 2-core Intel VM has it; the EPYC does
// not, and there the tests cover the other two paths).
//
// Both paths compute every output element with the same operations in the same order (8 fp32 lanes fused
// multiply-added over k, the lanes folded in one fixed tree, then the k % 8 tail), so they agree bit for bit; the
// tests check that. LOOKAHEAD_CPU_ISA=portable forces the portable path (tests, and hosts such as Grace or
// CPUs without AVX2 take it anyway), =avx2 the AVX2 path on an AVX-512 CPU; asking for a path this CPU lacks is
// an error.
#pragma once
#include <string>

namespace la {

enum class CpuIsa { Portable, Avx2, Avx512 };  // ordered: each path uses every instruction of the ones before

// The best path this CPU supports (x86-64 with AVX2, FMA and F16C; and AVX-512F), ignoring the environment.
CpuIsa detected_cpu_isa();
// The path the kernels use: LOOKAHEAD_CPU_ISA if set, else detected_cpu_isa(). Read once.
CpuIsa cpu_isa();
// Overrides cpu_isa() (tests); refusing a path this CPU cannot run.
void set_cpu_isa(CpuIsa isa);
const char* cpu_isa_name(CpuIsa isa);
// The AVX2 instructions may be used (the avx2 and avx512 paths).
inline bool cpu_avx2() { return cpu_isa() >= CpuIsa::Avx2; }

}  // namespace la
