// Host-side layout of a step for the CUDA forward (no libtorch, no CUDA: tested on any machine).
//
// The CUDA forward pads every step of T tokens to a bucket (the smallest of kStepBuckets >= T) so that one CUDA
// graph per bucket serves every step, and it sends the tree mask as packed ancestor bits built here, once per step,
// from the parents: row i, word w, bit b set iff token 32w+b is i or an ancestor of i (the layout of
// kernels/kernel_types.h, ancestor_words(T) words per row). Padding tokens go after the real ones with
// parent -1, token 0 and the last real position, and see only themselves: no real token has them as ancestors, so
// real outputs do not change, and their outputs are ignored (never committed).
#pragma once
#include <cstdint>
#include <vector>

namespace la {

// Step sizes a CUDA graph is captured for. A step larger than the last runs without a graph.
inline const std::vector<int>& step_buckets() {
  static const std::vector<int> b{1, 8, 16, 32, 64, 128, 256};
  return b;
}
// The smallest bucket >= T (T >= 1), or -1 when T exceeds the largest bucket.
int step_bucket(int T, const std::vector<int>& buckets = step_buckets());

inline int ancestor_words(int T) { return (T + 31) / 32; }

// Writes rows x ancestor_words(rows) words to bits (rows >= parents.size(); rows beyond the real tokens are
// padding: self bit only). A parent outside [-1, i) ends token i's ancestor walk (as the kernels treat it).
void pack_ancestor_bits(const int32_t* parents, int T, int rows, uint32_t* bits);
std::vector<uint32_t> pack_ancestor_bits(const std::vector<int32_t>& parents, int rows);

// One padded step as the CUDA forward uploads it: int32 words [ids | positions | parents | cache_len, 3 spare |
// ancestor bits | output rows], bucket B rows each; `words` is the total. Offsets depend only on B, so a graph
// captured for B reads the same addresses every replay.
//
// Output rows (StepInput::first_output): only rows that choose a next token get the LM head. A prompt chunk
// chooses none (or one: its last row), and on Gemma-3-270M (a 262,144-token vocabulary) the LM head is about 60%
// of a row's arithmetic. The fill functions list the step rows that are outputs, in order, and set
// lm_rows (the LM head's rows: 0 when no row is an output, else the smallest bucket holding them, at most B)
// and gather (false when every real row is an output: the LM head reads the step's first lm_rows rows as
// before; true: it reads the listed rows, gathered, entries past the list reading row 0, never used). Logits
// and argmax row j then belong to the j-th output row. A graph is captured per (B, lm_rows, gather).
struct PaddedStepLayout {
  int rows = 0;  // the bucket B
  int ids = 0, positions = 0, parents = 0, cache_len = 0, bits = 0, outputs = 0, words = 0;
  int lm_rows = 0;     // set by the fill functions (above)
  bool gather = false;
};
PaddedStepLayout padded_step_layout(int rows);
// The LM head's rows for `n_out` output rows of a step of `rows` (bucket) rows: 0, or the smallest step bucket
// holding them, at most rows.
int lm_head_rows(int n_out, int rows);
// Fills `out` (at least layout.words int32) with the padded step, rows first_output .. T-1 its outputs (sets
// layout.lm_rows and layout.gather). positions/parents/tokens have T <= rows entries.
void fill_padded_step(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                      const std::vector<int32_t>& parents, int cache_len, int first_output, PaddedStepLayout& layout,
                      int32_t* out);

// A batched step over several slots (requests of one model, each with its own KV cache) as the CUDA forward
// uploads it: the padded step of every slot's tokens (slot after slot; parents shifted to step indices, so the
// ancestor bits span the step and a token's ancestors are its own slot's rows), then per slot {first row, tokens,
// cache length, cache rows}, then the cache base pointers (int64, per layer: the slots' K bases, then their V
// bases). The slot count is fixed per bucket (batch_slots) so that one graph per bucket serves every batch, its
// pointers and lengths read from this upload; unused slots have 0 tokens.
inline constexpr int kMaxBatchSlots = 64;
inline int batch_slots(int rows) { return rows < kMaxBatchSlots ? rows : kMaxBatchSlots; }
struct BatchStepLayout {
  PaddedStepLayout step;
  int slots = 0, seg = 0, ptrs = 0, words = 0;  // ptrs: an even word offset (8-byte pointers)
};
BatchStepLayout batch_step_layout(int rows, int layers);
// One slot of a batched step on the host: its T tokens (positions, parents within the slot) and its cache.
struct BatchSlotStep {
  const int32_t *tokens = nullptr, *positions = nullptr, *parents = nullptr;
  int T = 0, cache_len = 0, cache_rows = 0;
  void* const* k = nullptr;  // per layer cache bases
  void* const* v = nullptr;
  int first_output = 0;      // rows first_output .. T-1 are outputs (their logits: slot after slot, see above)
};
// Fills `out` and sets l.step.lm_rows / l.step.gather (the outputs of every slot, slot after slot).
void fill_batch_step(const BatchSlotStep* slots, int n, int layers, BatchStepLayout& l, int32_t* out);

}  // namespace la
