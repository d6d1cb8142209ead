// Fuzzes the trie state file (--trie-state): TokenTrie::load into a small-capacity trie (so the capacity
// pruning after a load runs too), once with the raw input and once with the input as the body and a correct
// checksum appended (see with_checksum). An accepted file must leave the trie's invariants intact, serve
// retrievals and prompt insertions, and save and load back.
#include "fuzz_common.h"
#include "lookahead/draft/trie.h"

namespace {
la::TrieParams params() {
  la::TrieParams p;
  p.branch_length = 6;
  p.capacity = 64;
  return p;
}

void load_and_use(const std::string& path) {
  la::TokenTrie trie(params());
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
    la::fuzz::must("trie save/load round trip", [&] {
      const std::string again = la::fuzz::scratch_dir() + "/trie.saved";
      trie.save(again);
      la::TokenTrie back(params());
      back.load(again);
      back.check_invariants();
    });
  });
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  load_and_use(la::fuzz::write_scratch("trie.state", data, size));
  const std::string fixed = la::fuzz::with_checksum(data, size);
  load_and_use(la::fuzz::write_scratch("trie.state", fixed.data(), fixed.size()));
  return 0;
}
