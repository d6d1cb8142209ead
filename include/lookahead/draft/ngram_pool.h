// LADE n-gram pool: n-grams keyed by their first token, at most G continuations per key, least recently seen
// evicted first. No libtorch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace la {

class NgramPool {
 public:
  // n = n-gram length N (>= 2): key token + N-1 continuation tokens; max_per_key = G (>= 0; 0 keeps nothing).
  NgramPool(int n, int max_per_key);

  // Insert an n-gram (size n): keyed by ngram[0], continuation ngram[1..]. If present, refresh it to most recent;
  // else add it as most recent and evict the least recently seen entry of that key when over max_per_key.
  void insert(const int32_t* ngram);
  void insert(const std::vector<int32_t>& ngram);  // throws la::Error unless ngram.size() == n
  // The continuations (n-1 tokens each, without the key) stored for `key`, most recent first, at most `limit`
  // (limit < 0: all of them).
  std::vector<std::vector<int32_t>> lookup(int32_t key, int limit) const;
  // Allocation-free variant: appends the continuations (most recent first, at most `limit`) to `flat`, n-1
  // tokens each, and returns how many were appended.
  int lookup_into(int32_t key, int limit, std::vector<int32_t>& flat) const;
  // Insert every n-gram of a token sequence, in order (used for --pool-from-prompt).
  void insert_sequence(const std::vector<int32_t>& seq);

  size_t keys() const { return map_.size(); }
  size_t size() const { return size_; }
  void clear();
  int n() const { return n_; }
  int max_per_key() const { return max_per_key_; }

 private:
  int n_;
  int max_per_key_;
  size_t size_ = 0;
  // Per key: continuations stored back to back (n-1 tokens each), least recent first.
  std::unordered_map<int32_t, std::vector<int32_t>> map_;
};

}  // namespace la
