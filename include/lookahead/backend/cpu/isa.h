// Run-time ISA dispatch for the CPU kernels (llama.cpp's ggml CPU backend does the same): every kernel has a
// portable C++ path and, on x86-64, an AVX2+FMA+F16C path chosen when this CPU has those instructions. No other
// ISA path is shipped (the development machine cannot execute AVX-512, so none would be tested).
//
// Both paths compute every output element with the same operations in the same order (8 fp32 lanes fused
// multiply-added over k, the lanes folded in one fixed tree, then the k % 8 tail), so they agree bit for bit; the
// tests check that. LOOKAHEAD_CPU_ISA=portable forces the portable path (tests, and hosts such as Grace or
// CPUs without AVX2 take it anyway); LOOKAHEAD_CPU_ISA=avx2 on a CPU without it is an error.
#pragma once
#include <string>

namespace la {

enum class CpuIsa { Portable, Avx2 };

// The best path this CPU supports (x86-64 with AVX2, FMA and F16C), ignoring the environment.
CpuIsa detected_cpu_isa();
// The path the kernels use: LOOKAHEAD_CPU_ISA if set, else detected_cpu_isa(). Read once.
CpuIsa cpu_isa();
// Overrides cpu_isa() (tests); refusing a path this CPU cannot run.
void set_cpu_isa(CpuIsa isa);
const char* cpu_isa_name(CpuIsa isa);

}  // namespace la
