// Ouroboros phrase pool: phrases (token vectors, length >= 1) keyed by their first token, most recently
// inserted first, at most max_per_key per key (the least recent is evicted). No libtorch.
//
// * insert(p): if p is already stored it moves to most recent; else it is added as most recent.
// * replace(old, corrected): `old` is removed from the pool (if present) and `corrected` is inserted as most
//   recent (the verified correction of a drafted extension replaces the stale phrase). The two may have different
//   lengths and keys.
// * lookup(key, limit): whole phrases (phrase[0] == key), most recent first, at most `limit` (< 0: all).
// * State file: binary, little-endian: magic "LAPHRASE" (8 bytes), u32 version (1), u32 reserved (0), u64 key
//   count, then per key {i32 key, u32 phrase count, then per phrase (least recent first) {u32 length, i32
//   tokens[length]}}, then a u64 FNV-1a checksum of everything before it. save() writes "<path>.tmp.<pid>" in the
//   same directory and renames it over the path; load() replaces the contents (keeping the most recent
//   max_per_key of a key) and throws la::Error naming the file when it is missing, truncated, corrupt or of the
//   wrong magic/version.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace la {

class PhrasePool {
 public:
  explicit PhrasePool(int max_per_key);  // >= 0 (0 keeps nothing)

  void insert(const std::vector<int32_t>& phrase);  // an empty phrase is ignored
  void replace(const std::vector<int32_t>& old_phrase, const std::vector<int32_t>& corrected_phrase);
  bool remove(const std::vector<int32_t>& phrase);  // true if it was present
  bool contains(const std::vector<int32_t>& phrase) const;
  std::vector<std::vector<int32_t>> lookup(int32_t key, int limit) const;

  void save(const std::string& path) const;
  void load(const std::string& path);
  void clear();

  size_t keys() const { return map_.size(); }
  size_t size() const { return size_; }
  int max_per_key() const { return max_per_key_; }

 private:
  int max_per_key_;
  size_t size_ = 0;
  std::unordered_map<int32_t, std::vector<std::vector<int32_t>>> map_;  // per key, least recent first
};

}  // namespace la
