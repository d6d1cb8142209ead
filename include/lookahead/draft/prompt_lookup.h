// Prompt lookup decoding index: propose the tokens that followed the most recent earlier occurrence of the
// context's longest recurring suffix (suffix lengths max_n down to min_n). No libtorch.
//
// The index is incremental: it remembers, for every n-gram (min_n <= n <= max_n) of the context that has a
// following token, the end position of its most recent occurrence. A call with a context that extends the
// previous one only indexes the new positions, so a step costs O(max_n * new tokens + max_n), not O(context).
// A context that does not extend the last one (shorter, or a different indexed prefix end) is re-indexed from
// scratch; call reset() when a new request starts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace la {

class PromptLookup {
 public:
  PromptLookup(int min_n, int max_n);  // 1 <= min_n <= max_n <= 64

  void reset();
  // Up to k tokens that followed the most recent earlier occurrence of the longest suffix of ctx (length
  // max_n first, then shorter, down to min_n) that occurred before; fewer if the context ends first; empty
  // when no suffix of length >= min_n recurs (or k <= 0). ctx[0, n) must extend the context of the last call.
  std::vector<int32_t> propose(const int32_t* ctx, size_t n, int k);
  std::vector<int32_t> propose(const std::vector<int32_t>& ctx, int k) { return propose(ctx.data(), ctx.size(), k); }
  // The same into `out` (cleared first; its capacity is reused, so no allocation per step).
  void propose_into(const int32_t* ctx, size_t n, int k, std::vector<int32_t>& out);
  // The suffix length that produced the last non-empty proposal (0 if the last proposal was empty).
  int last_match_length() const { return last_match_; }
  size_t indexed() const { return next_p_ - 1; }  // end positions 1..indexed() are in the index
  size_t entries() const { return last_end_.size(); }

 private:
  void extend(const int32_t* ctx, size_t n);
  int min_n_, max_n_;
  size_t next_p_ = 1;         // next end position to index (positions 1 .. next_p_-1 are done)
  size_t last_n_ = 0;         // length of the last context seen
  int32_t last_token_ = 0;    // its last token: cheap check that a new context extends the old one
  int last_match_ = 0;
  // hash(n-gram, n) -> end position p (n-gram is ctx[p-n, p), its follower ctx[p]) of the latest occurrence.
  std::unordered_map<uint64_t, uint32_t> last_end_;
};

}  // namespace la
