// Tests of the suffix tree (draft/suffix_tree.h) and the suffix strategy's global state (draft/suffix_state.h):
// counts against brute force, removal, best-first drafts, the byte bound, and the state file's refusals.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "lookahead/draft/suffix_state.h"
#include "lookahead/draft/suffix_tree.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "common/expect_error.h"
#include "common/temp_dir.h"

using V = std::vector<int32_t>;
using la::test::error_of;

namespace {

// Occurrences of `p` as a substring of a window s[i, i+D) starting at i, over all sequences (brute force).
int32_t brute_count(const std::vector<V>& seqs, const V& p, int depth) {
  int32_t n = 0;
  if (static_cast<int>(p.size()) > depth) return 0;
  for (const auto& s : seqs)
    for (size_t i = 0; i + p.size() <= s.size(); ++i)
      if (std::equal(p.begin(), p.end(), s.begin() + static_cast<std::ptrdiff_t>(i))) ++n;
  return n;
}

}  // namespace

TEST(SuffixTree, CountsOfTheHeaderExample) {
  la::SuffixTree t(3);
  const V s = {0, 1, 0, 1, 2};  // a b a b c
  t.insert(s.data(), s.size());
  t.check_invariants();
  EXPECT_EQ(t.count_of(V{0}.data(), 1), 2);
  EXPECT_EQ(t.count_of(V{0, 1}.data(), 2), 2);
  EXPECT_EQ(t.count_of(V{0, 1, 0}.data(), 3), 1);
  EXPECT_EQ(t.count_of(V{0, 1, 2}.data(), 3), 1);
  EXPECT_EQ(t.count_of(V{1, 0, 1}.data(), 3), 1);
  EXPECT_EQ(t.count_of(V{1, 2}.data(), 2), 1);
  EXPECT_EQ(t.count_of(V{2}.data(), 1), 1);
  EXPECT_EQ(t.size(), 9u);
  // Context "x a b": the longest suffix with continuations is "a b" (length 2; depth 3 allows at most 2).
  const V ctx = {7, 0, 1};
  const auto m = t.match(ctx.data(), ctx.size(), 8);
  EXPECT_EQ(m.length, 2);
  la::SuffixDraft d;
  t.draft(m, 8, 0.0, 8, d);
  ASSERT_EQ(d.size(), 2);  // a and c, one occurrence each
  EXPECT_FLOAT_EQ(d.probs[0], 0.5f);
  EXPECT_FLOAT_EQ(d.probs[1], 0.5f);
  EXPECT_DOUBLE_EQ(d.score, 1.0);
  t.draft(m, 8, 0.6, 8, d);  // both below the cut
  EXPECT_EQ(d.size(), 0);
}

TEST(SuffixTree, RandomInsertRemoveMatchesBruteForce) {
  std::mt19937 rng(3);
  for (int depth : {1, 2, 5, 9}) {
    la::SuffixTree t(depth);
    std::vector<V> live;
    for (int round = 0; round < 60; ++round) {
      if (!live.empty() && rng() % 3 == 0) {
        const size_t k = rng() % live.size();
        t.remove(live[k].data(), live[k].size());
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        V s(rng() % 30);
        for (auto& x : s) x = static_cast<int32_t>(rng() % 4);
        t.insert(s.data(), s.size());
        live.push_back(s);
      }
      t.check_invariants();
      for (int q = 0; q < 20; ++q) {
        V p(1 + rng() % static_cast<uint32_t>(depth));
        for (auto& x : p) x = static_cast<int32_t>(rng() % 4);
        ASSERT_EQ(t.count_of(p.data(), p.size()), brute_count(live, p, depth)) << "depth " << depth;
      }
    }
    for (const auto& s : live) t.remove(s.data(), s.size());
    EXPECT_EQ(t.size(), 0u);
    t.check_invariants();
    EXPECT_NE(error_of([&] { t.remove(V{1, 2}.data(), 2); }).find("not inserted"), std::string::npos);
  }
}

// Best first: a parent precedes its children, and every node's probability is at least that of every later node
// whose parent came before it (that node was a candidate when this one was taken). A smaller budget keeps a prefix.
TEST(SuffixTree, DraftIsBestFirstAndBudgetPrefixes) {
  std::mt19937 rng(5);
  la::SuffixTree t(12);
  for (int i = 0; i < 30; ++i) {
    V s(40);
    for (auto& x : s) x = static_cast<int32_t>(rng() % 5);
    t.insert(s.data(), s.size());
  }
  const V ctx = {1, 2};
  const auto m = t.match(ctx.data(), ctx.size(), 6);
  ASSERT_GT(m.length, 0);
  la::SuffixDraft full, part;
  t.draft(m, 40, 0.0, 10, full);
  ASSERT_EQ(full.size(), 40);
  for (int i = 0; i < full.size(); ++i) {
    ASSERT_LT(full.parents[i], i);
    if (full.parents[i] >= 0) {
      EXPECT_LE(full.probs[i], full.probs[full.parents[i]] + 1e-6);
    }
    for (int j = i + 1; j < full.size(); ++j) {
      if (full.parents[j] < i) {
        EXPECT_GE(full.probs[i] + 1e-6, full.probs[j]) << i << " " << j;
      }
    }
  }
  for (int b : {1, 5, 17}) {
    t.draft(m, b, 0.0, 10, part);
    ASSERT_EQ(part.size(), b);
    for (int i = 0; i < b; ++i) {
      EXPECT_EQ(part.tokens[i], full.tokens[i]);
      EXPECT_EQ(part.parents[i], full.parents[i]);
    }
  }
  // The depth limit holds.
  t.draft(m, 40, 0.0, 2, part);
  for (int i = 0; i < part.size(); ++i) {
    int d = 1;
    for (int p = part.parents[i]; p >= 0; p = part.parents[p]) ++d;
    EXPECT_LE(d, 2);
  }
}

TEST(SuffixGlobal, ByteBoundEvictsOldest) {
  la::SuffixGlobal g(8, 20000, 100, 0);
  std::mt19937 rng(1);
  std::vector<V> all;
  for (int i = 0; i < 50; ++i) {
    V s(60);
    for (auto& x : s) x = static_cast<int32_t>(rng() % 100);
    g.add(s.data(), s.size());
    all.push_back(s);
    EXPECT_LE(g.bytes(), 20000u);
    g.tree().check_invariants();
  }
  EXPECT_GT(g.evicted(), 0u);
  EXPECT_EQ(g.sequences() + g.evicted(), 50u);
  // What is left is exactly the newest sequences.
  const std::vector<V> newest(all.end() - static_cast<std::ptrdiff_t>(g.sequences()), all.end());
  for (int q = 0; q < 200; ++q) {
    V p(1 + rng() % 3);
    for (auto& x : p) x = static_cast<int32_t>(rng() % 100);
    ASSERT_EQ(g.tree().count_of(p.data(), p.size()), brute_count(newest, p, 8));
  }
}

// Learning is lazy (suffix_state.h): add() only stores, tree() inserts. Stored-but-not-inserted outputs count
// against the byte bound, and the tree built late answers as brute force over what is kept.
TEST(SuffixGlobal, LazyLearningStoresThenInsertsWithinTheBound) {
  la::SuffixGlobal g(4, 10000, 3, 0);  // 50 x 60 tokens = 12000 bytes stored; the tree holds at most 120 nodes
  std::mt19937 rng(2);
  std::vector<V> all;
  for (int i = 0; i < 50; ++i) {
    V s(60);
    for (auto& x : s) x = static_cast<int32_t>(rng() % 3);
    g.add(s.data(), s.size());
    all.push_back(s);
    EXPECT_LE(g.bytes(), 10000u);
    EXPECT_EQ(g.tree_nodes(), 0u) << "add() inserted into the tree";
    EXPECT_EQ(g.pending(), g.sequences());
  }
  EXPECT_GT(g.evicted(), 0u) << "the stored outputs alone exceed the bound";
  g.tree().check_invariants();
  EXPECT_EQ(g.pending(), 0u);
  EXPECT_GT(g.tree_nodes(), 0u);
  EXPECT_LE(g.bytes(), 10000u);
  EXPECT_EQ(g.sequences() + g.evicted(), 50u);
  EXPECT_GT(g.sequences(), 0u);
  const std::vector<V> newest(all.end() - static_cast<std::ptrdiff_t>(g.sequences()), all.end());
  for (int q = 0; q < 200; ++q) {
    V p(1 + rng() % 3);
    for (auto& x : p) x = static_cast<int32_t>(rng() % 3);
    ASSERT_EQ(g.tree().count_of(p.data(), p.size()), brute_count(newest, p, 4));
  }
}

TEST(SuffixGlobal, StateFileRoundTripAndRefusals) {
  la::test::TempDir td;
  const std::string f = td.path("suffix.state");
  la::SuffixGlobal a(8, 1 << 20, 50, 1234);
  const V s1 = {1, 2, 3, 4, 1, 2, 3}, s2 = {9, 8, 7};
  a.add(s1.data(), s1.size());
  a.add(s2.data(), s2.size());
  a.save(f);
  la::SuffixGlobal b(6, 1 << 20, 50, 1234);  // another depth still loads (the sequences are stored)
  b.load(f);
  EXPECT_EQ(b.sequences(), 2u);
  EXPECT_EQ(b.tree().count_of(V{1, 2, 3}.data(), 3), 2);
  const std::string good = la::test::read_bytes(f);
  auto refused = [&](const std::string& bytes, la::SuffixGlobal& g) {
    la::test::write_bytes(f, bytes);
    const std::string e = error_of([&] { g.load(f); });
    EXPECT_NE(e.find(f), std::string::npos) << e;
    EXPECT_EQ(g.sequences(), 2u) << "a refused file leaves the state unchanged";
    return e;
  };
  EXPECT_NE(refused(good.substr(0, good.size() - 3), b).find("checksum"), std::string::npos);
  EXPECT_NE(refused(good.substr(0, 10), b).find("truncated"), std::string::npos);
  EXPECT_NE(refused("XXSUFX\r\n" + good.substr(8), b).find("wrong magic"), std::string::npos);
  std::string flipped = good;
  flipped[40] ^= 1;
  EXPECT_NE(refused(flipped, b).find("checksum"), std::string::npos);
  la::SuffixGlobal other_vocab(8, 1 << 20, 49, 1234);
  other_vocab.add(s2.data(), s2.size());
  other_vocab.add(s2.data(), s2.size());
  EXPECT_NE(refused(good, other_vocab).find("vocabulary of 50 tokens, this model has 49"), std::string::npos);
  la::SuffixGlobal other_model(8, 1 << 20, 50, 99);
  other_model.add(s2.data(), s2.size());
  other_model.add(s2.data(), s2.size());
  EXPECT_NE(refused(good, other_model).find("another model or tokenizer"), std::string::npos);
  // A token outside the vocabulary (file rewritten with a valid checksum).
  la::SuffixGlobal wide(8, 1 << 20, 60, 1234);
  const V bad = {55, 1};
  wide.add(bad.data(), bad.size());
  wide.save(f);
  std::string w = la::test::read_bytes(f);
  std::memcpy(&w[12], "\x32\x00\x00\x00", 4);  // vocabulary 50
  const uint64_t sum = la::fnv1a64(w.data(), w.size() - 8);
  std::memcpy(&w[w.size() - 8], &sum, 8);
  EXPECT_NE(refused(w, b).find("outside the vocabulary"), std::string::npos);
}
