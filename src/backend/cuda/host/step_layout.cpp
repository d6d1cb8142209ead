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
  l.words = l.bits + rows * ancestor_words(rows);
  return l;
}

void fill_padded_step(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
                      const std::vector<int32_t>& parents, int cache_len, const PaddedStepLayout& l, int32_t* out) {
  const int T = static_cast<int>(tokens.size());
  LA_CHECK(T >= 1 && T <= l.rows && positions.size() == tokens.size() && parents.size() == tokens.size(),
           "fill_padded_step: ", T, " tokens for ", l.rows, " rows");
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
}

}  // namespace la
