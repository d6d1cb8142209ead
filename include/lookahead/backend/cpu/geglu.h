// GeGLU on the CPU (Gemma's MLP): act[t][i] = gelu_tanh(gate[t][i]) * up[t][i], with ATen's tanh-approximate GELU
// (what Hugging Face's gelu_pytorch_tanh calls): gelu_tanh(g) = 0.5 * g * (1 + tanh(b * (g + k * g * g * g))),
// b = sqrt(2) * (2 / sqrt(pi)) * 0.5, k = 0.044715, evaluated in that order in fp32.
//
// Batch invariance: elementwise; rows split across threads, each value computed alone from its own inputs.
#pragma once

namespace la {

class ThreadPool;

// gu: [T, 2I] (gate then up, ldgu floats per row); act: [T, I] (ldact per row).
void geglu_rows(ThreadPool& pool, const float* gu, int ldgu, int T, int I, float* act, int ldact);

}  // namespace la
