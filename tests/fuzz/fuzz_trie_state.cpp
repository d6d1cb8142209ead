// Fuzzes the trie state file (--trie-state): TokenTrie::load into a small-capacity trie (so the capacity
// pruning after a load runs too). An accepted file must leave the trie's invariants intact, serve a retrieval,
// and save and load back to the same size.
#include "fuzz_common.h"
#include "lookahead/draft/trie.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = la::fuzz::write_scratch("trie.state", data, size);
  la::TrieParams p;
  p.branch_length = 6;
  p.capacity = 64;
  la::TokenTrie trie(p);
  trie.insert_branch({1, 2, 3}, la::BranchSource::generated());
  la::fuzz::rejecting([&] {
    trie.load(path);
    la::fuzz::must("trie invariants after load", [&] { trie.check_invariants(); });
    la::TrieDraft d;
    for (int32_t t : {0, 1, 2, 7})
      trie.retrieve(std::vector<int32_t>{3, t}, 16, 5, la::TrieMode::Hierarchical, d);
    trie.retrieve(std::vector<int32_t>{1}, 16, 5, la::TrieMode::Parallel, d);
    trie.insert_branch({1, 2, 4}, la::BranchSource::from_prompt(7));
    trie.end_request(7);
    la::fuzz::must("trie invariants after use", [&] { trie.check_invariants(); });
    const std::string again = la::fuzz::scratch_dir() + "/trie.saved";
    la::fuzz::must("trie save/load round trip", [&] {
      trie.save(again);
      la::TokenTrie back(p);
      back.load(again);
      back.check_invariants();
    });
  });
  return 0;
}
