// The suffix strategy's global state: earlier outputs, oldest first, in a tree bounded in bytes (evicting the
// oldest sequences), and its state file (--suffix-state). No libtorch.
//
// Lazy: add() and load() only store the sequence; tree() inserts what is stored and not yet in the tree, oldest
// first. A strategy the adaptive controller has put to sleep (draft_controller.h) keeps learning every output at
// the cost of a copy, and pays the insertion only when it drafts again: on a tiny model, where a plain step costs
// about as much as inserting its token at depth 32, eager insertion cost 3-5% of the job. The byte bound covers
// the stored sequences and the tree at all times, so a long sleep holds at most the bound.
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
  void add(const int32_t* t, size_t n);  // one finished output (stored); evicts the oldest while over the bound
  SuffixTree& tree();                     // the tree over every stored sequence (inserts the pending ones)
  size_t tree_nodes() const { return tree_.size(); }            // without inserting the pending sequences
  size_t pending() const { return seqs_.size() - inserted_; }  // stored, not yet in the tree
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
  std::deque<std::vector<int32_t>> seqs_;  // oldest first; the first inserted_ are in the tree
  size_t inserted_ = 0;
  size_t seq_bytes_ = 0;
  uint64_t evicted_ = 0;
};

}  // namespace la
