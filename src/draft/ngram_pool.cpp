#include "lookahead/draft/ngram_pool.h"

#include <algorithm>

#include "lookahead/util/error.h"

namespace la {

NgramPool::NgramPool(int n, int max_per_key) : n_(n), max_per_key_(max_per_key) {
  LA_CHECK(n >= 2, "n-gram pool: n-gram length must be at least 2 (got ", n, ")");
  LA_CHECK(max_per_key >= 0, "n-gram pool: max entries per key must be >= 0 (got ", max_per_key, ")");
}

void NgramPool::insert(const int32_t* ngram) {
  if (max_per_key_ == 0) return;
  const size_t m = static_cast<size_t>(n_ - 1);
  const int32_t* cont = ngram + 1;
  auto& v = map_[ngram[0]];
  const size_t count = v.size() / m;
  // Already present: move it to the back (most recent).
  for (size_t e = 0; e < count; ++e) {
    int32_t* p = v.data() + e * m;
    if (std::equal(cont, cont + m, p)) {
      if (e + 1 < count) {
        std::rotate(v.begin() + static_cast<std::ptrdiff_t>(e * m), v.begin() + static_cast<std::ptrdiff_t>((e + 1) * m),
                    v.end());
      }
      return;
    }
  }
  if (count >= static_cast<size_t>(max_per_key_)) {
    // Evict the least recently seen (front) entry.
    v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
  } else {
    ++size_;
  }
  v.insert(v.end(), cont, cont + m);
}

void NgramPool::insert(const std::vector<int32_t>& ngram) {
  LA_CHECK(ngram.size() == static_cast<size_t>(n_), "n-gram pool: inserting an n-gram of size ", ngram.size(),
           " into a pool of ", n_, "-grams");
  insert(ngram.data());
}

int NgramPool::lookup_into(int32_t key, int limit, std::vector<int32_t>& flat) const {
  auto it = map_.find(key);
  if (it == map_.end() || limit == 0) return 0;
  const size_t m = static_cast<size_t>(n_ - 1);
  const auto& v = it->second;
  const int count = static_cast<int>(v.size() / m);
  const int take = limit < 0 ? count : std::min(count, limit);
  for (int k = 0; k < take; ++k) {
    const int32_t* p = v.data() + static_cast<size_t>(count - 1 - k) * m;
    flat.insert(flat.end(), p, p + m);
  }
  return take;
}

std::vector<std::vector<int32_t>> NgramPool::lookup(int32_t key, int limit) const {
  std::vector<std::vector<int32_t>> out;
  auto it = map_.find(key);
  if (it == map_.end() || limit == 0) return out;
  const size_t m = static_cast<size_t>(n_ - 1);
  const auto& v = it->second;
  const int count = static_cast<int>(v.size() / m);
  const int take = limit < 0 ? count : std::min(count, limit);
  out.reserve(static_cast<size_t>(take));
  for (int k = 0; k < take; ++k) {
    const int32_t* p = v.data() + static_cast<size_t>(count - 1 - k) * m;
    out.emplace_back(p, p + m);
  }
  return out;
}

void NgramPool::insert_sequence(const std::vector<int32_t>& seq) {
  const size_t n = static_cast<size_t>(n_);
  for (size_t i = 0; i + n <= seq.size(); ++i) insert(seq.data() + i);
}

void NgramPool::clear() {
  map_.clear();
  size_ = 0;
}

}  // namespace la
