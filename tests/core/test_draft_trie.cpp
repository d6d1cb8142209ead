// Unit tests: the Lookahead (KDD'24) token trie.
#include "common/expect_error.h"
#include "common/temp_dir.h"
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "lookahead/draft/trie.h"
#include "lookahead/util/error.h"

namespace fs = std::filesystem;
using la::BranchSource;
using la::TokenTrie;
using la::TrieDraft;
using la::TrieMode;
using la::TrieParams;
using V = std::vector<int32_t>;

using la::test::TempDir;
using la::test::expect_error;
using la::test::read_bytes;
using la::test::write_bytes;

namespace {

const BranchSource kGen = BranchSource::generated();

TrieParams params(int branch_length, size_t capacity = 1000) {
  TrieParams p;
  p.branch_length = branch_length;
  p.capacity = capacity;
  return p;
}

void insert_n(TokenTrie& t, const V& branch, int times, BranchSource src = BranchSource::generated()) {
  for (int i = 0; i < times; ++i) t.insert_branch(branch, src);
}

TrieDraft get(const TokenTrie& t, const V& ctx, int L, int max_depth = 100,
              TrieMode mode = TrieMode::Hierarchical) {
  TrieDraft d;
  t.retrieve(ctx, L, max_depth, mode, d);
  return d;
}

// Structural checks every draft must pass; returns the maximum depth.
int check_draft(const TrieDraft& d, int L, int max_depth, bool merged) {
  EXPECT_EQ(d.tokens.size(), d.parents.size());
  EXPECT_LE(d.size(), std::max(L, 0));
  std::vector<int> depth(d.size());
  std::set<std::pair<int32_t, int32_t>> seen;
  int maxd = 0;
  for (int i = 0; i < d.size(); ++i) {
    EXPECT_GE(d.parents[i], -1);
    EXPECT_LT(d.parents[i], i);
    depth[i] = d.parents[i] < 0 ? 1 : depth[d.parents[i]] + 1;
    maxd = std::max(maxd, depth[i]);
    if (merged) {
      EXPECT_TRUE(seen.insert({d.parents[i], d.tokens[i]}).second) << "duplicate sibling at " << i;
    }
  }
  EXPECT_LE(maxd, std::max(max_depth, 0));
  return maxd;
}


}  // namespace

TEST(DraftTrie, InsertAddsFrequencyAlongThePath) {
  TokenTrie t(params(4));
  t.insert_branch(V{1, 2, 3}, kGen);
  t.insert_branch(V{1, 2, 4}, kGen);
  t.insert_branch(V{1, 2, 3, 4, 5, 6}, kGen);  // cut to branch_length 4
  EXPECT_EQ(t.size(), 5u);
  EXPECT_DOUBLE_EQ(t.find(V{1}).generated, 3);
  EXPECT_DOUBLE_EQ(t.find(V{1, 2}).generated, 3);
  EXPECT_DOUBLE_EQ(t.find(V{1, 2, 3}).generated, 2);
  EXPECT_DOUBLE_EQ(t.find(V{1, 2, 4}).generated, 1);
  EXPECT_TRUE(t.find(V{1, 2, 3, 4}).found);
  EXPECT_FALSE(t.find(V{1, 2, 3, 4, 5}).found);
  EXPECT_FALSE(t.find(V{2}).found);
  t.insert_branch(V{1, 9}, BranchSource::from_prompt(3));
  EXPECT_DOUBLE_EQ(t.find(V{1}).prompt, 1);
  EXPECT_DOUBLE_EQ(t.find(V{1}).generated, 3);
  EXPECT_DOUBLE_EQ(t.find(V{1, 9}).prompt, 1);
  EXPECT_DOUBLE_EQ(t.find(V{1, 9}).generated, 0);
  EXPECT_EQ(t.active_requests(), 1u);
  t.check_invariants();
}

TEST(DraftTrie, InsertWindowsSlidesOverTheSequence) {
  TokenTrie t(params(3));
  t.insert_windows(V{1, 2, 3, 4}, kGen);  // [1,2,3] [2,3,4] [3,4] [4]
  EXPECT_EQ(t.size(), 9u);  // 1,12,123, 2,23,234, 3,34, 4
  EXPECT_DOUBLE_EQ(t.find(V{3}).generated, 1);
  EXPECT_DOUBLE_EQ(t.find(V{3, 4}).generated, 1);
  EXPECT_DOUBLE_EQ(t.find(V{4}).generated, 1);
  EXPECT_FALSE(t.find(V{1, 2, 3, 4}).found);
}

TEST(DraftTrie, RetrievalIsBestFirstByFrequency) {
  TokenTrie t(params(4));
  insert_n(t, V{5, 1, 2}, 3);
  insert_n(t, V{5, 3, 4}, 1);
  insert_n(t, V{5, 1, 7}, 2);
  auto d = get(t, V{9, 5}, 10);
  EXPECT_EQ(d.tokens, (V{1, 2, 7, 3, 4}));
  EXPECT_EQ(d.parents, (V{-1, 0, 0, -1, 3}));
  d = get(t, V{9, 5}, 2);
  EXPECT_EQ(d.tokens, (V{1, 2}));
  EXPECT_EQ(d.parents, (V{-1, 0}));
  d = get(t, V{9, 5}, 10, /*max_depth=*/1);
  EXPECT_EQ(d.tokens, (V{1, 3}));
  EXPECT_EQ(d.parents, (V{-1, -1}));
  EXPECT_EQ(get(t, V{9, 5}, 0).size(), 0);
  EXPECT_EQ(get(t, V{9, 5}, 10, 0).size(), 0);
  EXPECT_EQ(get(t, V{8}, 10).size(), 0);   // unknown token
  EXPECT_EQ(get(t, V{9, 2}, 10).size(), 0);  // token only known deeper in the trie
  EXPECT_EQ(get(t, V{1, 2}, 10).size(), 0);  // query [1,2] unknown, [2] unknown at the top
}

TEST(DraftTrie, LongQueryWithTooFewNodesFallsBackToShorter) {
  TokenTrie t(params(6));
  t.insert_branch(V{8, 9, 5, 1}, kGen);  // after [8,9,5] comes 1 (once)
  insert_n(t, V{5, 2, 3}, 5);            // after [5] comes 2,3 (often)
  // Enough nodes under the longest query: no fallback, the precise continuation wins.
  auto d = get(t, V{8, 9, 5}, 1);
  EXPECT_EQ(d.tokens, (V{1}));
  // Too few: the shorter query [5] fills the rest, after the longer query's node.
  d = get(t, V{8, 9, 5}, 4);
  EXPECT_EQ(d.tokens, (V{1, 2, 3}));
  EXPECT_EQ(d.parents, (V{-1, -1, 1}));
  // Without the long context only the short query matches.
  d = get(t, V{7, 9, 5}, 4);
  EXPECT_EQ(d.tokens, (V{2, 3}));
  // max_query = 1 only ever uses the last token.
  TrieParams p = params(6);
  p.max_query = 1;
  TokenTrie s(p);
  s.insert_branch(V{8, 9, 5, 1}, kGen);
  insert_n(s, V{5, 2, 3}, 5);
  EXPECT_EQ(get(s, V{8, 9, 5}, 4).tokens, (V{2, 3}));
}

TEST(DraftTrie, FallbackMergesDuplicatePaths) {
  TokenTrie t(params(5));
  insert_n(t, V{7, 5, 1, 2}, 2);
  insert_n(t, V{5, 1, 3}, 4);
  insert_n(t, V{5, 1, 2}, 1);
  // q=2 ([7,5]) gives 1 -> 2; q=1 ([5]) adds 3 under the same 1 (no duplicate 1 or 2).
  auto d = get(t, V{7, 5}, 10);
  EXPECT_EQ(d.tokens, (V{1, 2, 3}));
  EXPECT_EQ(d.parents, (V{-1, 0, 0}));
  check_draft(d, 10, 100, true);
}

TEST(DraftTrie, PromptBranchesWeighMoreThanGenerated) {
  TokenTrie t(params(3));
  t.insert_branch(V{5, 1}, BranchSource::from_prompt(0));  // score 2.0
  t.insert_branch(V{5, 2}, kGen);                          // score 1.0
  EXPECT_EQ(get(t, V{5}, 1).tokens, (V{1}));
  EXPECT_EQ(get(t, V{5}, 2).tokens, (V{1, 2}));
  insert_n(t, V{5, 2}, 2);  // score 3.0
  EXPECT_EQ(get(t, V{5}, 1).tokens, (V{2}));
  // With the weights swapped the same counts select the other branch.
  TrieParams p = params(3);
  p.prompt_weight = 0.5;
  TokenTrie s(p);
  s.insert_branch(V{5, 1}, BranchSource::from_prompt(0));
  s.insert_branch(V{5, 2}, kGen);
  EXPECT_EQ(get(s, V{5}, 1).tokens, (V{2}));
  // Ties break on the smaller token.
  TokenTrie u(params(3));
  u.insert_branch(V{5, 9}, kGen);
  u.insert_branch(V{5, 4}, kGen);
  EXPECT_EQ(get(u, V{5}, 1).tokens, (V{4}));
}

TEST(DraftTrie, HierarchicalAndParallelShapes) {
  TokenTrie t(params(5));
  insert_n(t, V{5, 1, 2, 3}, 3);
  insert_n(t, V{5, 1, 4}, 2);
  insert_n(t, V{5, 6}, 1);
  auto h = get(t, V{5}, 20, 100, TrieMode::Hierarchical);
  EXPECT_EQ(h.tokens, (V{1, 2, 3, 4, 6}));
  EXPECT_EQ(h.parents, (V{-1, 0, 1, 0, -1}));
  auto p = get(t, V{5}, 20, 100, TrieMode::Parallel);
  EXPECT_EQ(p.tokens, (V{1, 2, 3, 1, 4, 6}));
  EXPECT_EQ(p.parents, (V{-1, 0, 1, -1, 3, -1}));
  // The budget bounds the total including repeated prefixes; the last chain is cut.
  p = get(t, V{5}, 4, 100, TrieMode::Parallel);
  EXPECT_EQ(p.tokens, (V{1, 2, 3, 1}));
  EXPECT_EQ(p.parents, (V{-1, 0, 1, -1}));
  h = get(t, V{5}, 4, 100, TrieMode::Hierarchical);
  EXPECT_EQ(h.tokens, (V{1, 2, 3, 4}));
  // Every parallel node has at most one child: chains.
  p = get(t, V{5}, 20, 2, TrieMode::Parallel);
  EXPECT_EQ(p.tokens, (V{1, 2, 1, 4, 6}));
  EXPECT_EQ(p.parents, (V{-1, 0, -1, 2, -1}));
  EXPECT_EQ(la::parse_trie_mode("parallel"), TrieMode::Parallel);
  EXPECT_EQ(la::parse_trie_mode("hierarchical"), TrieMode::Hierarchical);
  EXPECT_THROW(la::parse_trie_mode("tree"), la::Error);
}

TEST(DraftTrie, DepthIsBoundedByBranchLength) {
  TokenTrie t(params(4));
  insert_n(t, V{1, 2, 3, 4, 5, 6, 7}, 2);
  auto d = get(t, V{1}, 64);
  EXPECT_EQ(d.tokens, (V{2, 3, 4}));  // windows are 4 long: at most 3 below the query token
  EXPECT_EQ(check_draft(d, 64, 100, true), 3);
  TokenTrie one(params(1));
  one.insert_windows(V{1, 2, 1, 2}, kGen);
  EXPECT_EQ(one.size(), 2u);
  EXPECT_EQ(get(one, V{1}, 64).size(), 0);  // branch length 1: nothing to draft
}

TEST(DraftTrie, EndRequestEliminatesItsPromptFrequency) {
  TokenTrie t(params(3));
  t.insert_branch(V{5, 1, 2}, BranchSource::from_prompt(0));
  t.insert_branch(V{5, 1}, kGen);
  t.insert_branch(V{7, 8}, BranchSource::from_prompt(0));
  t.insert_branch(V{7, 8}, BranchSource::from_prompt(1));
  EXPECT_EQ(t.size(), 5u);
  t.end_request(0);
  EXPECT_FALSE(t.find(V{5, 1, 2}).found);
  EXPECT_TRUE(t.find(V{5, 1}).found);
  EXPECT_DOUBLE_EQ(t.find(V{5, 1}).prompt, 0);
  EXPECT_DOUBLE_EQ(t.find(V{5, 1}).generated, 1);
  EXPECT_DOUBLE_EQ(t.find(V{7, 8}).prompt, 1);  // request 1 still holds it
  EXPECT_EQ(t.size(), 4u);
  t.end_request(42);  // unknown: no-op
  EXPECT_EQ(t.size(), 4u);
  t.end_request(1);
  EXPECT_FALSE(t.find(V{7}).found);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.active_requests(), 0u);
  t.check_invariants();
}

TEST(DraftTrie, DecayAndPruneWhenOverCapacity) {
  TrieParams p = params(3, 6);
  p.prune_target = 1.0;
  TokenTrie t(p);
  insert_n(t, V{1, 2, 3}, 4);
  insert_n(t, V{4, 5, 6}, 1);
  EXPECT_EQ(t.size(), 6u);
  EXPECT_EQ(t.prune_passes(), 0u);
  t.insert_branch(V{7, 8}, kGen);  // would make 8 > 6: one decay round removes the frequency-1 branch
  EXPECT_EQ(t.prune_passes(), 1u);
  EXPECT_EQ(t.decay_rounds(), 1u);
  EXPECT_DOUBLE_EQ(t.find(V{1, 2, 3}).generated, 2);
  EXPECT_FALSE(t.find(V{4}).found);
  EXPECT_DOUBLE_EQ(t.find(V{7, 8}).generated, 1);  // the new branch survives
  EXPECT_EQ(t.size(), 5u);
  t.check_invariants();
}

TEST(DraftTrie, PruningRepeatsRoundsUntilWithinCapacity) {
  TrieParams p = params(3, 3);
  p.prune_target = 1.0;
  TokenTrie t(p);
  insert_n(t, V{1, 2, 3}, 4);
  insert_n(t, V{1, 2}, 4);  // [1],[1,2] at 8, [1,2,3] at 4
  t.insert_branch(V{9}, kGen);
  // Rounds: 8,8,4 -> 4,4,2 -> 2,2,1 -> 1,1,(0.5 pruned) = 2 nodes <= 3-1: three rounds.
  EXPECT_EQ(t.decay_rounds(), 3u);
  EXPECT_DOUBLE_EQ(t.find(V{1, 2}).generated, 1);
  EXPECT_FALSE(t.find(V{1, 2, 3}).found);
  EXPECT_DOUBLE_EQ(t.find(V{9}).generated, 1);
  EXPECT_EQ(t.size(), 3u);
  // A prompt's frequency decays too, and its elimination removes exactly what is left of it.
  TrieParams q = params(3, 4);
  q.prune_target = 1.0;
  TokenTrie u(q);
  insert_n(u, V{1, 2}, 2, BranchSource::from_prompt(5));
  insert_n(u, V{1, 2}, 2);
  insert_n(u, V{3, 4}, 1);
  u.insert_branch(V{6}, kGen);  // 5 > 4: one round; [3,4] goes
  EXPECT_DOUBLE_EQ(u.find(V{1, 2}).prompt, 1);
  EXPECT_DOUBLE_EQ(u.find(V{1, 2}).generated, 1);
  u.end_request(5);
  EXPECT_DOUBLE_EQ(u.find(V{1, 2}).prompt, 0);
  EXPECT_DOUBLE_EQ(u.find(V{1, 2}).generated, 1);
  u.check_invariants();
}

TEST(DraftTrie, ZeroCapacityKeepsNothing) {
  TokenTrie t(params(4, 0));
  t.insert_windows(V{1, 2, 3, 1, 2, 3}, kGen);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(get(t, V{1}, 8).size(), 0);
  t.check_invariants();
}

TEST(DraftTrie, CapacityInvariantUnderRandomOperations) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 6; ++trial) {
    TrieParams p;
    p.branch_length = 1 + static_cast<int>(rng() % 8);
    p.capacity = static_cast<size_t>(rng() % 300);
    p.prune_target = trial % 2 ? 1.0 : 0.8;
    p.max_query = 1 + static_cast<int>(rng() % 6);
    TokenTrie t(p);
    std::set<int64_t> active;
    int64_t next_req = 0;
    const int vocab = 4 + static_cast<int>(rng() % 20);
    for (int op = 0; op < 3000; ++op) {
      const int kind = static_cast<int>(rng() % 10);
      V seq(1 + rng() % 14);
      for (auto& x : seq) x = static_cast<int32_t>(rng() % vocab);
      if (kind < 5) {
        t.insert_branch(seq, kGen);
      } else if (kind < 7) {
        const int64_t r = active.empty() || rng() % 3 == 0 ? next_req++ : *active.begin();
        active.insert(r);
        t.insert_windows(seq, BranchSource::from_prompt(r));
      } else if (kind < 8) {
        if (!active.empty()) {
          auto it = active.begin();
          std::advance(it, static_cast<long>(rng() % active.size()));
          t.end_request(*it);
          active.erase(it);
        }
      } else {
        const int L = static_cast<int>(rng() % 70);
        const int md = static_cast<int>(rng() % 12);
        const bool par = rng() % 2;
        TrieDraft d;
        t.retrieve(seq, L, md, par ? TrieMode::Parallel : TrieMode::Hierarchical, d);
        check_draft(d, L, std::min(md, p.branch_length - 1), !par);
      }
      ASSERT_LE(t.size(), p.capacity) << "trial " << trial << " op " << op;
      if (op % 50 == 0) {
        ASSERT_NO_THROW(t.check_invariants()) << "trial " << trial << " op " << op;
      }
    }
    for (int64_t r : active) t.end_request(r);
    ASSERT_EQ(t.active_requests(), 0u);
    t.check_invariants();
  }
}

TEST(DraftTrie, SaveLoadRoundTripGivesIdenticalRetrieval) {
  TempDir td("la_trie");
  const std::string f = td.path("trie.bin");
  std::mt19937 rng(99);
  TrieParams p = params(6, 3000);
  TokenTrie t(p);
  V text;
  for (int i = 0; i < 4000; ++i) text.push_back(static_cast<int32_t>(rng() % 30 < 20 ? rng() % 8 : rng() % 60));
  t.insert_windows(text, kGen);
  t.insert_windows(V{1, 2, 3, 4, 5}, BranchSource::from_prompt(0));
  t.end_request(0);
  ASSERT_GT(t.prune_passes(), 0u);  // the file holds decayed (fractional) frequencies
  t.save(f);
  EXPECT_EQ(std::distance(fs::directory_iterator(td.dir), fs::directory_iterator()), 1);  // no temp file left
  TokenTrie u(p);
  u.insert_branch(V{77, 78}, kGen);  // replaced by the load
  u.load(f);
  EXPECT_EQ(u.size(), t.size());
  EXPECT_FALSE(u.find(V{77}).found);
  u.check_invariants();
  for (int i = 0; i < 500; ++i) {
    V ctx(1 + rng() % 10);
    for (auto& x : ctx) x = static_cast<int32_t>(rng() % 10);
    for (auto mode : {TrieMode::Hierarchical, TrieMode::Parallel}) {
      const int L = 1 + static_cast<int>(rng() % 64);
      const auto a = get(t, ctx, L, 10, mode), b = get(u, ctx, L, 10, mode);
      ASSERT_EQ(a.tokens, b.tokens);
      ASSERT_EQ(a.parents, b.parents);
    }
  }
  // Loading into a smaller trie enforces its capacity.
  TokenTrie small(params(6, 100));
  small.load(f);
  EXPECT_LE(small.size(), 100u);
  EXPECT_GT(small.size(), 0u);
  small.check_invariants();
}

TEST(DraftTrie, SaveDropsPromptOnlyNodes) {
  TempDir td("la_trie");
  const std::string f = td.path("t.bin");
  TokenTrie t(params(4));
  t.insert_branch(V{1, 2, 3}, kGen);
  t.insert_branch(V{1, 2, 9}, BranchSource::from_prompt(0));  // request still running at save
  t.save(f);
  TokenTrie u(params(4));
  u.load(f);
  EXPECT_EQ(u.size(), 3u);
  EXPECT_DOUBLE_EQ(u.find(V{1, 2}).generated, 1);
  EXPECT_DOUBLE_EQ(u.find(V{1, 2}).prompt, 0);
  EXPECT_FALSE(u.find(V{1, 2, 9}).found);
}

TEST(DraftTrie, BadStateFilesThrowNamingTheFile) {
  TempDir td("la_trie");
  const std::string f = td.path("state.trie");
  TokenTrie t(params(4));
  t.insert_windows(V{1, 2, 3, 4, 1, 2, 5}, kGen);
  t.save(f);
  const std::string good = read_bytes(f);
  TokenTrie u(params(4));
  u.insert_branch(V{7, 7}, kGen);

  const std::string missing = td.path("missing.trie");
  expect_error([&] { u.load(missing); }, missing, "cannot open");

  write_bytes(f, good.substr(0, good.size() - 3));
  expect_error([&] { u.load(f); }, f, "truncated");
  write_bytes(f, good.substr(0, 12));
  expect_error([&] { u.load(f); }, f, "truncated");
  write_bytes(f, "");
  expect_error([&] { u.load(f); }, f, "truncated");

  std::string bad = good;
  bad[1] = 'Z';
  write_bytes(f, bad);
  expect_error([&] { u.load(f); }, f, "wrong magic");

  bad = good;
  bad[8] = 9;
  write_bytes(f, bad);
  expect_error([&] { u.load(f); }, f, "version");

  bad = good;
  bad[good.size() - 20] ^= 0x01;
  write_bytes(f, bad);
  expect_error([&] { u.load(f); }, f, "checksum");

  bad = good + std::string(16, '\0');
  write_bytes(f, bad);
  expect_error([&] { u.load(f); }, f, "does not match");

  // A failed load leaves the trie as it was.
  EXPECT_EQ(u.size(), 2u);
  EXPECT_TRUE(u.find(V{7, 7}).found);
  write_bytes(f, good);
  u.load(f);
  EXPECT_EQ(u.size(), t.size());
}

TEST(DraftTrie, RetrievalIsFast) {
  std::mt19937 rng(5);
  TrieParams p = params(12, 100000);
  TokenTrie t(p);
  // Zipf-like text over 2000 tokens with repeated phrases.
  std::vector<V> phrases(300);
  for (auto& ph : phrases) {
    ph.resize(3 + rng() % 10);
    for (auto& x : ph) x = static_cast<int32_t>(rng() % 2000);
  }
  V text;
  while (text.size() < 60000) {
    if (rng() % 2) {
      const auto& ph = phrases[rng() % phrases.size()];
      text.insert(text.end(), ph.begin(), ph.end());
    } else {
      const double u = std::uniform_real_distribution<double>(0, 1)(rng);
      text.push_back(static_cast<int32_t>(std::pow(2000.0, u)) - 1);
    }
  }
  t.insert_windows(text, kGen);
  ASSERT_LE(t.size(), 100000u);
  ASSERT_GT(t.size(), 10000u);
  TrieDraft d;
  size_t total = 0;
  const int N = 2000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < N; ++i) {
    const size_t at = 16 + rng() % (text.size() - 16);
    t.retrieve(text.data(), at, 64, 16, i % 4 == 3 ? TrieMode::Parallel : TrieMode::Hierarchical, d);
    total += static_cast<size_t>(d.size());
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / N;
  std::printf("[ trie ] %zu nodes, %.1f us per retrieval (decoding_length 64), %.1f nodes per draft\n", t.size(), us,
              static_cast<double>(total) / N);
  EXPECT_GT(total, static_cast<size_t>(N) * 8);  // drafts are not trivially small
  EXPECT_LT(us, 2000.0);                          // loose: this also runs under ASan in Debug
}
