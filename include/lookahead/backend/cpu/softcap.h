// Soft-capping on the CPU (Gemma-2's final logits): x = tanh(x / cap) * cap in place, transformers' order of
// operations (divide, tanh, multiply) in fp32. The attention scores' soft-cap is applied inside step attention
// (attention.h) with the same formula.
//
// Batch invariance: elementwise; rows split across threads, each value computed alone from itself.
#pragma once

namespace la {

class ThreadPool;

// Rows t < T of n floats, ld apart.
void softcap_rows(ThreadPool& pool, float* x, int ld, int T, int n, float cap);

}  // namespace la
