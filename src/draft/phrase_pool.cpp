#include "lookahead/draft/phrase_pool.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "lookahead/util/error.h"
#include "lookahead/util/state_file.h"

namespace la {

namespace {

constexpr StateFormat kFormat{"phrase pool state file", "phrase pool", {'L', 'A', 'P', 'H', 'R', 'A', 'S', 'E'}, 1};

}  // namespace

PhrasePool::PhrasePool(int max_per_key) : max_per_key_(max_per_key) {
  LA_CHECK(max_per_key >= 0, "phrase pool: max phrases per key must be >= 0 (got ", max_per_key, ")");
}

void PhrasePool::clear() {
  map_.clear();
  size_ = 0;
}

bool PhrasePool::remove(const std::vector<int32_t>& phrase) {
  if (phrase.empty()) return false;
  auto it = map_.find(phrase[0]);
  if (it == map_.end()) return false;
  auto& v = it->second;
  auto p = std::find(v.begin(), v.end(), phrase);
  if (p == v.end()) return false;
  v.erase(p);
  --size_;
  if (v.empty()) map_.erase(it);
  return true;
}

bool PhrasePool::contains(const std::vector<int32_t>& phrase) const {
  if (phrase.empty()) return false;
  auto it = map_.find(phrase[0]);
  return it != map_.end() && std::find(it->second.begin(), it->second.end(), phrase) != it->second.end();
}

void PhrasePool::insert(const std::vector<int32_t>& phrase) {
  if (phrase.empty() || max_per_key_ == 0) return;
  auto& v = map_[phrase[0]];
  auto p = std::find(v.begin(), v.end(), phrase);
  if (p != v.end()) {
    std::rotate(p, p + 1, v.end());  // refresh: move to the back (most recent)
    return;
  }
  if (v.size() >= static_cast<size_t>(max_per_key_)) {
    v.erase(v.begin());  // evict the least recent
  } else {
    ++size_;
  }
  v.push_back(phrase);
}

void PhrasePool::replace(const std::vector<int32_t>& old_phrase, const std::vector<int32_t>& corrected_phrase) {
  if (old_phrase != corrected_phrase) remove(old_phrase);
  insert(corrected_phrase);
}

std::vector<std::vector<int32_t>> PhrasePool::lookup(int32_t key, int limit) const {
  std::vector<std::vector<int32_t>> out;
  auto it = map_.find(key);
  if (it == map_.end() || limit == 0) return out;
  const auto& v = it->second;
  const size_t take = limit < 0 ? v.size() : std::min(v.size(), static_cast<size_t>(limit));
  out.reserve(take);
  for (size_t k = 0; k < take; ++k) out.push_back(v[v.size() - 1 - k]);
  return out;
}

void PhrasePool::save(const std::string& path) const {
  std::string s = begin_state(kFormat);
  put<uint32_t>(s, 0);
  // Keys in ascending order so the file does not depend on hash order.
  std::vector<int32_t> ks;
  ks.reserve(map_.size());
  for (const auto& kv : map_) ks.push_back(kv.first);
  std::sort(ks.begin(), ks.end());
  put<uint64_t>(s, ks.size());
  for (int32_t k : ks) {
    const auto& v = map_.at(k);
    put<int32_t>(s, k);
    put<uint32_t>(s, static_cast<uint32_t>(v.size()));
    for (const auto& ph : v) {
      put<uint32_t>(s, static_cast<uint32_t>(ph.size()));
      for (int32_t t : ph) put<int32_t>(s, t);
    }
  }
  commit_state(kFormat, s, path);
}

void PhrasePool::load(const std::string& path) {
  StateFile r(kFormat, path, kStateHeaderBytes + 4 + 8 + kStateTrailerBytes);
  r.check_checksum();
  (void)r.next<uint32_t>();
  const uint64_t nkeys = r.next<uint64_t>();
  if (nkeys > r.left() / 8) r.fail(nkeys, " keys do not fit in the file (corrupt)");
  PhrasePool fresh(max_per_key_);
  for (uint64_t k = 0; k < nkeys; ++k) {
    const int32_t key = r.next<int32_t>();
    const uint32_t count = r.next<uint32_t>();
    if (count > r.left() / 4) r.fail("key ", key, " has ", count, " phrases, more than the file holds (corrupt)");
    if (fresh.map_.find(key) != fresh.map_.end()) r.fail("key ", key, " appears twice");
    for (uint32_t j = 0; j < count; ++j) {
      const uint32_t len = r.next<uint32_t>();
      if (len < 1 || len > r.left() / 4) r.fail("phrase of length ", len, " under key ", key, " (corrupt)");
      std::vector<int32_t> ph(len);
      for (uint32_t t = 0; t < len; ++t) ph[t] = r.next<int32_t>();
      if (ph[0] != key) r.fail("a phrase under key ", key, " starts with ", ph[0]);
      fresh.insert(ph);
    }
  }
  if (r.left() != 0) r.fail(r.left(), " trailing bytes (corrupt)");
  map_.swap(fresh.map_);
  size_ = fresh.size_;
}

}  // namespace la
