// Host-side step layout for the CUDA forward: buckets, padding, packed ancestor bits (see step_layout.h).
#include "lookahead/backend/cuda/step_layout.h"

#include <cstring>

#include "lookahead/util/error.h"

namespace la {

int step_bucket(int T, const std::vector<int>& buckets) {
  for (int b : buckets)
    if (b >= T) return b;
  return -1;
}

void pack_ancestor_bits(const int32_t* parents, int T, int rows, uint32_t* bits) {
  const int words = ancestor_words(rows);
  std::memset(bits, 0, sizeof(uint32_t) * size_t(rows) * size_t(words));
  for (int i = 0; i < rows; ++i) {
    uint32_t* row = bits + size_t(i) * words;
    row[i >> 5] |= 1u << (i & 31);
    if (i >= T) continue;  // padding: itself only
    // Walk up; ancestors were packed before (parents[i] < i), so OR in the parent's finished row.
    const int p = parents[i];
    if (p >= 0 && p < i) {
      const uint32_t* prow = bits + size_t(p) * words;
      for (int w = 0; w < words; ++w) row[w] |= prow[w];
    }
  }
}

std::vector<uint32_t> pack_ancestor_bits(const std::vector<int32_t>& parents, int rows) {
  const int T = static_cast<int>(parents.size());
  LA_CHECK(rows >= T, "pack_ancestor_bits: ", rows, " rows for ", T, " tokens");
  std::vector<uint32_t> bits(size_t(rows) * ancestor_words(rows));
  pack_ancestor_bits(parents.data(), T, rows, bits.data());
  return bits;
}

PaddedStepLayout padded_step_layout(int rows) {
  PaddedStepLayout l;
  l.rows = rows;
  l.ids = 0;
  l.positions = rows;
  l.parents = 2 * rows;
  l.cache_len = 3 * rows;
  l.bits = 3 * rows + 4;  // keeps the bits 16-byte aligned when the buffer is
  if (l.bits % 4) l.bits += 4 - l.bits % 4;
  l.outputs = l.bits + rows * ancestor_words(rows);
  l.words = l.outputs + rows;
  l.lm_rows = rows;
  return l;
}

int lm_head_rows(int n_out, int rows) {
  if (n_out <= 0) return 0;
  const int b = step_bucket(n_out);
  return b < 0 || b > rows ? rows : b;
}

namespace {

// After the caller listed the n_out output rows of a step of T real rows: pads the list with row 0 (read by the
// LM head's padding rows, never used) and sets the LM head's rows.
void finish_outputs(int n_out, int T, PaddedStepLayout& l, int32_t* out) {
  for (int j = n_out; j < l.rows; ++j) out[l.outputs + j] = 0;
  l.lm_rows = lm_head_rows(n_out, l.rows);
  l.gather = n_out < T;
}

}  // namespace

void fill_padded_step(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                      const std::vector<int32_t>& parents, int cache_len, int first_output, PaddedStepLayout& l,
                      int32_t* out) {
  const int T = static_cast<int>(tokens.size());
  LA_CHECK(T >= 1 && T <= l.rows && positions.size() == tokens.size() && parents.size() == tokens.size(),
           "fill_padded_step: ", T, " tokens for ", l.rows, " rows");
  LA_CHECK(first_output >= 0 && first_output <= T, "fill_padded_step: first output ", first_output, " of ", T);
  const int32_t pad_pos = positions[T - 1];
  for (int i = 0; i < l.rows; ++i) {
    const bool real = i < T;
    out[l.ids + i] = real ? tokens[i] : 0;
    out[l.positions + i] = real ? positions[i] : pad_pos;
    out[l.parents + i] = real ? parents[i] : -1;
  }
  out[l.cache_len] = cache_len;
  out[l.cache_len + 1] = out[l.cache_len + 2] = out[l.cache_len + 3] = 0;
  pack_ancestor_bits(parents.data(), T, l.rows, reinterpret_cast<uint32_t*>(out + l.bits));
  for (int t = first_output; t < T; ++t) out[l.outputs + t - first_output] = t;
  finish_outputs(T - first_output, T, l, out);
}

BatchStepLayout batch_step_layout(int rows, int layers) {
  BatchStepLayout l;
  l.step = padded_step_layout(rows);
  l.slots = batch_slots(rows);
  l.seg = l.step.words;
  l.ptrs = l.seg + 4 * l.slots;
  l.ptrs += l.ptrs % 2;
  l.words = l.ptrs + 2 * layers * l.slots * 2;  // two int32 words per pointer
  return l;
}

void fill_batch_step(const BatchSlotStep* slots, int n, int layers, BatchStepLayout& l, int32_t* out) {
  PaddedStepLayout& s = l.step;
  LA_CHECK(n >= 1 && n <= l.slots, "fill_batch_step: ", n, " slots for a layout of ", l.slots);
  int T = 0, n_out = 0;
  for (int i = 0; i < n; ++i) {
    const BatchSlotStep& b = slots[i];
    LA_CHECK(b.T >= 1 && T + b.T <= s.rows, "fill_batch_step: ", T + b.T, " tokens for ", s.rows, " rows");
    LA_CHECK(b.first_output >= 0 && b.first_output <= b.T, "fill_batch_step: slot ", i, " first output ",
             b.first_output, " of ", b.T);
    for (int j = b.first_output; j < b.T; ++j) out[s.outputs + n_out++] = T + j;
    for (int j = 0; j < b.T; ++j) {
      out[s.ids + T + j] = b.tokens[j];
      out[s.positions + T + j] = b.positions[j];
      const int32_t p = b.parents[j];
      out[s.parents + T + j] = p < 0 ? -1 : p + T;  // one outside [0, j) stays outside [T, T + j)
    }
    int32_t* seg = out + l.seg + 4 * i;
    seg[0] = T;
    seg[1] = b.T;
    seg[2] = b.cache_len;
    seg[3] = b.cache_rows;
    for (int layer = 0; layer < layers; ++layer) {
      const int64_t k = reinterpret_cast<int64_t>(b.k[layer]), v = reinterpret_cast<int64_t>(b.v[layer]);
      std::memcpy(out + l.ptrs + 2 * (2 * layer * l.slots + i), &k, 8);
      std::memcpy(out + l.ptrs + 2 * ((2 * layer + 1) * l.slots + i), &v, 8);
    }
    T += b.T;
  }
  for (int i = n; i < l.slots; ++i) {  // unused slots: no tokens, null caches (never read)
    int32_t* seg = out + l.seg + 4 * i;
    seg[0] = T;
    seg[1] = seg[2] = seg[3] = 0;
    for (int layer = 0; layer < layers; ++layer) {
      std::memset(out + l.ptrs + 2 * (2 * layer * l.slots + i), 0, 8);
      std::memset(out + l.ptrs + 2 * ((2 * layer + 1) * l.slots + i), 0, 8);
    }
  }
  const int32_t pad_pos = out[s.positions + T - 1];
  for (int i = T; i < s.rows; ++i) {
    out[s.ids + i] = 0;
    out[s.positions + i] = pad_pos;
    out[s.parents + i] = -1;
  }
  out[s.cache_len] = out[s.cache_len + 1] = out[s.cache_len + 2] = out[s.cache_len + 3] = 0;
  pack_ancestor_bits(out + s.parents, T, s.rows, reinterpret_cast<uint32_t*>(out + s.bits));
  finish_outputs(n_out, T, s, out);
}

}  // namespace la
