// The suffix strategy's global state: earlier outputs, oldest first, in a tree bounded in bytes (evicting the
// oldest sequences), and its state file (--suffix-state). No libtorch.
//
// State file, little-endian: magic "LASUFX\r\n" (8 bytes), u32 version (1), i32 vocabulary size, u64 model
// identity (a hash of the model's weights and tokenizer, 0 = unknown), u64 sequence count, then per sequence a u32
// length and its i32 tokens, then a u64 FNV-1a checksum of everything before it. The tree itself is not stored:
// load() re-inserts the sequences (so a file never carries an inconsistent tree, and a different --suffix-depth
// still loads). A truncated, corrupt or wrong-magic/version file, one written for another vocabulary size or model,
// and a token outside the vocabulary are each one la::Error naming the file; the state is then unchanged.
// save() writes atomically (write_file_atomic).
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "lookahead/draft/suffix_tree.h"

namespace la {

class SuffixGlobal {
 public:
  // `max_bytes`: bound of the tree plus the stored sequences (0: keep nothing). vocab/model: the identity the state
  // file must carry (vocab 0: not checked; model 0: not checked).
  SuffixGlobal(int depth, int64_t max_bytes, int32_t vocab, uint64_t model);
  void add(const int32_t* t, size_t n);  // one finished output; evicts the oldest while over the bound
  SuffixTree& tree() { return tree_; }
  const SuffixTree& tree() const { return tree_; }
  size_t sequences() const { return seqs_.size(); }
  size_t bytes() const { return tree_.bytes() + seq_bytes_; }
  uint64_t evicted() const { return evicted_; }
  void save(const std::string& path) const;
  void load(const std::string& path);

 private:
  void evict_to_bound();
  SuffixTree tree_;
  int64_t max_bytes_;
  int32_t vocab_;
  uint64_t model_;
  std::deque<std::vector<int32_t>> seqs_;
  size_t seq_bytes_ = 0;
  uint64_t evicted_ = 0;
};

}  // namespace la
