// Unit tests: prompt lookup decoding index.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "lookahead/draft/prompt_lookup.h"
#include "lookahead/util/error.h"

using la::PromptLookup;
using V = std::vector<int32_t>;

namespace {
// Brute force: longest suffix (max_n .. min_n) with an earlier occurrence; the most recent one; k tokens after.
V reference(const V& c, int min_n, int max_n, int k, int* match = nullptr) {
  const int n = static_cast<int>(c.size());
  if (match) *match = 0;
  for (int len = max_n; len >= min_n; --len) {
    if (len > n - 1) continue;
    for (int start = n - len - 1; start >= 0; --start) {
      bool eq = true;
      for (int j = 0; j < len && eq; ++j) eq = c[start + j] == c[n - len + j];
      if (!eq) continue;
      const int p = start + len;
      if (match) *match = len;
      return V(c.begin() + p, c.begin() + std::min(n, p + k));
    }
  }
  return {};
}
}  // namespace

TEST(DraftPromptLookup, LongestMatchFirst) {
  //        0  1  2  3  4  5  6  7  8  9 10 11
  V ctx = {1, 2, 3, 9, 7, 2, 3, 8, 5, 1, 2, 3};
  PromptLookup a(1, 3);
  EXPECT_EQ(a.propose(ctx, 3), (V{9, 7, 2}));  // [1,2,3] occurred at 0..3
  EXPECT_EQ(a.last_match_length(), 3);
  PromptLookup b(1, 2);
  EXPECT_EQ(b.propose(ctx, 3), (V{8, 5, 1}));  // [2,3]: most recent earlier occurrence ends at 7
  EXPECT_EQ(b.last_match_length(), 2);
}

TEST(DraftPromptLookup, MostRecentOccurrence) {
  V ctx = {4, 1, 5, 4, 1, 6, 4, 1, 7, 0, 4, 1};
  PromptLookup a(2, 2);
  EXPECT_EQ(a.propose(ctx, 2), (V{7, 0}));
}

TEST(DraftPromptLookup, MinAndMaxBounds) {
  V ctx = {4, 5, 6, 1, 2, 3, 6};  // only the 1-gram [6] recurs
  PromptLookup a(2, 4);
  EXPECT_TRUE(a.propose(ctx, 5).empty());
  EXPECT_EQ(a.last_match_length(), 0);
  PromptLookup b(1, 4);
  EXPECT_EQ(b.propose(ctx, 2), (V{1, 2}));
  EXPECT_EQ(b.last_match_length(), 1);
  // A 5-gram recurs but max_n = 3 caps the match length.
  V c2 = {1, 2, 3, 4, 5, 8, 1, 2, 3, 4, 5};
  PromptLookup d(1, 3);
  EXPECT_EQ(d.propose(c2, 4), (V{8, 1, 2, 3}));
  EXPECT_EQ(d.last_match_length(), 3);
  EXPECT_THROW(PromptLookup(0, 2), la::Error);
  EXPECT_THROW(PromptLookup(3, 2), la::Error);
}

TEST(DraftPromptLookup, KBoundAndContextEnd) {
  V ctx = {1, 2, 3, 1, 2};
  PromptLookup a(1, 4);
  EXPECT_EQ(a.propose(ctx, 10), (V{3, 1, 2}));  // the context ends after 3 tokens
  EXPECT_EQ(a.propose(ctx, 2), (V{3, 1}));
  EXPECT_TRUE(a.propose(ctx, 0).empty());
  PromptLookup b(1, 4);
  EXPECT_TRUE(b.propose(V{5}, 4).empty());
  EXPECT_TRUE(b.propose(V{}, 4).empty());
}

TEST(DraftPromptLookup, IncrementalMatchesBruteForce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const int min_n = 1 + static_cast<int>(rng() % 3);
    const int max_n = min_n + static_cast<int>(rng() % 4);
    const int k = 1 + static_cast<int>(rng() % 8);
    PromptLookup pl(min_n, max_n);
    V ctx;
    const int vocab = 3 + static_cast<int>(rng() % 6);
    for (int step = 0; step < 300; ++step) {
      const int add = 1 + static_cast<int>(rng() % 3);
      for (int j = 0; j < add; ++j) ctx.push_back(static_cast<int32_t>(rng() % vocab));
      int want_len = 0;
      const V want = reference(ctx, min_n, max_n, k, &want_len);
      ASSERT_EQ(pl.propose(ctx, k), want) << "trial " << trial << " step " << step;
      ASSERT_EQ(pl.last_match_length(), want_len);
    }
    // A context that does not extend the last one is re-indexed.
    V other(ctx.begin(), ctx.begin() + static_cast<long>(ctx.size() / 2));
    other.push_back(static_cast<int32_t>(vocab + 1));
    other.push_back(other[0]);
    ASSERT_EQ(pl.propose(other, k), reference(other, min_n, max_n, k));
    pl.reset();
    ASSERT_EQ(pl.propose(ctx, k), reference(ctx, min_n, max_n, k));
  }
}
