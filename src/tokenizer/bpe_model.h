// The BPE model of a Hugging Face tokenizer.json (internal to src/tokenizer): vocabulary, ranked merges, and the
// merge loop that turns one pre-tokenized piece into ids.
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace la {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  struct Options {
    bool ignore_merges = false;  // a piece that is itself in the vocabulary is one token (Llama-3)
    bool byte_fallback = false;  // unknown characters become <0xXX> tokens when those exist
    bool fuse_unk = false;
    std::string unk_token;       // empty: unknown characters are dropped, as in tokenizers
  };
  // Throws la::Error naming `origin` when a merge names a token (or yields one) missing from the vocabulary.
  BpeModel(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, const Options& opt,
           const std::string& origin);

  // Appends the ids of one piece (already mapped by the ByteLevel pre-tokenizer).
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const;
  int32_t id_of(std::string_view token) const;  // -1 if absent
  const Vocab& vocab() const { return vocab_; }

 private:
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  void merge(std::string_view piece, std::vector<int32_t>& out) const;
  Vocab vocab_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (left, right) -> (rank, merged id)
  Options opt_;
  int32_t unk_id_ = -1;
  // Pieces already merged (words repeat); bounded like tokenizers' own cache, filled until it is full.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace la
