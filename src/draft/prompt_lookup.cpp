#include "lookahead/draft/prompt_lookup.h"

#include <algorithm>

#include "lookahead/util/error.h"

namespace la {

namespace {
inline uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 31);
}
}  // namespace

PromptLookup::PromptLookup(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  LA_CHECK(min_n >= 1, "prompt lookup: minimum n-gram length must be >= 1 (got ", min_n, ")");
  LA_CHECK(max_n <= 64, "prompt lookup: maximum n-gram length must be <= 64 (got ", max_n, ")");
  LA_CHECK(max_n >= min_n, "prompt lookup: maximum n-gram length (", max_n, ") is below the minimum (", min_n, ")");
}

void PromptLookup::reset() {
  next_p_ = 1;
  last_n_ = 0;
  last_token_ = 0;
  last_match_ = 0;
  last_end_.clear();
}

// Index every n-gram ctx[p-len, p) with p in [next_p_, n-1] (so ctx[p] exists as its follower).
void PromptLookup::extend(const int32_t* ctx, size_t n) {
  if (n < last_n_ || (last_n_ > 0 && ctx[last_n_ - 1] != last_token_)) reset();
  for (size_t p = next_p_; p < n; ++p) {
    uint64_t h = 0x51ed270b27a3c0d5ULL;
    for (int len = 1; len <= max_n_ && static_cast<size_t>(len) <= p; ++len) {
      h = mix(h, static_cast<uint32_t>(ctx[p - len]));
      if (len >= min_n_) last_end_[mix(h, static_cast<uint64_t>(len))] = static_cast<uint32_t>(p);
    }
  }
  if (n > next_p_) next_p_ = n;
  last_n_ = n;
  if (n > 0) last_token_ = ctx[n - 1];
}

std::vector<int32_t> PromptLookup::propose(const int32_t* ctx, size_t n, int k) {
  std::vector<int32_t> out;
  propose_into(ctx, n, k, out);
  return out;
}

void PromptLookup::propose_into(const int32_t* ctx, size_t n, int k, std::vector<int32_t>& out) {
  last_match_ = 0;
  out.clear();
  extend(ctx, n);
  if (k <= 0 || n < 2) return;
  // Suffix hashes for lengths 1..max_n, built backwards from the end like the index.
  uint64_t hs[64];
  const int top = std::min<int>(max_n_, static_cast<int>(std::min<size_t>(n - 1, 64)));
  uint64_t h = 0x51ed270b27a3c0d5ULL;
  for (int len = 1; len <= top; ++len) {
    h = mix(h, static_cast<uint32_t>(ctx[n - len]));
    hs[len - 1] = mix(h, static_cast<uint64_t>(len));
  }
  for (int len = top; len >= min_n_; --len) {
    auto it = last_end_.find(hs[len - 1]);
    if (it == last_end_.end()) continue;
    const size_t p = it->second;
    if (p < static_cast<size_t>(len) || p >= n) continue;
    // Guard against hash collisions: the stored occurrence must really equal the suffix.
    if (!std::equal(ctx + (p - len), ctx + p, ctx + (n - len))) continue;
    const size_t end = std::min(n, p + static_cast<size_t>(k));
    out.assign(ctx + p, ctx + end);
    last_match_ = len;
    return;
  }
}

}  // namespace la
