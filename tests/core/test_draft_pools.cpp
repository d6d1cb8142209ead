// Unit tests: LADE n-gram pool and Ouroboros phrase pool.
#include "common/expect_error.h"
#include "common/temp_dir.h"
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "lookahead/draft/ngram_pool.h"
#include "lookahead/draft/phrase_pool.h"
#include "lookahead/util/error.h"

namespace fs = std::filesystem;
using la::NgramPool;
using la::PhrasePool;
using V = std::vector<int32_t>;
using VV = std::vector<std::vector<int32_t>>;

using la::test::TempDir;
using la::test::expect_error;
using la::test::read_bytes;
using la::test::write_bytes;

// ----------------------------------------------------------------------------------------------------------------
// NgramPool

TEST(DraftNgramPool, InsertLookupMostRecentFirst) {
  NgramPool p(3, 3);
  p.insert(V{1, 2, 3});
  p.insert(V{1, 4, 5});
  p.insert(V{1, 6, 7});
  EXPECT_EQ(p.lookup(1, -1), (VV{{6, 7}, {4, 5}, {2, 3}}));
  EXPECT_EQ(p.lookup(1, 2), (VV{{6, 7}, {4, 5}}));
  EXPECT_EQ(p.lookup(1, 0), VV{});
  EXPECT_EQ(p.lookup(2, 5), VV{});
  EXPECT_EQ(p.size(), 3u);
  EXPECT_EQ(p.keys(), 1u);
}

TEST(DraftNgramPool, RefreshMovesToFrontWithoutGrowing) {
  NgramPool p(3, 3);
  p.insert(V{1, 2, 3});
  p.insert(V{1, 4, 5});
  p.insert(V{1, 6, 7});
  p.insert(V{1, 2, 3});
  EXPECT_EQ(p.lookup(1, -1), (VV{{2, 3}, {6, 7}, {4, 5}}));
  EXPECT_EQ(p.size(), 3u);
  p.insert(V{1, 6, 7});  // a middle entry
  EXPECT_EQ(p.lookup(1, -1), (VV{{6, 7}, {2, 3}, {4, 5}}));
}

TEST(DraftNgramPool, EvictsLeastRecentlySeen) {
  NgramPool p(3, 3);
  p.insert(V{1, 2, 3});
  p.insert(V{1, 4, 5});
  p.insert(V{1, 6, 7});
  p.insert(V{1, 2, 3});  // refresh: least recent is now {4,5}
  p.insert(V{1, 8, 9});
  EXPECT_EQ(p.lookup(1, -1), (VV{{8, 9}, {2, 3}, {6, 7}}));
  EXPECT_EQ(p.size(), 3u);
  p.insert(V{2, 8, 9});  // another key is independent
  EXPECT_EQ(p.size(), 4u);
  EXPECT_EQ(p.keys(), 2u);
  EXPECT_EQ(p.lookup(2, -1), (VV{{8, 9}}));
  p.clear();
  EXPECT_EQ(p.size(), 0u);
  EXPECT_EQ(p.keys(), 0u);
  EXPECT_EQ(p.lookup(1, -1), VV{});
}

TEST(DraftNgramPool, InsertSequenceAndLookupInto) {
  NgramPool p(3, 4);
  p.insert_sequence(V{1, 2, 3, 4, 1, 2, 5});
  EXPECT_EQ(p.size(), 5u);
  EXPECT_EQ(p.keys(), 4u);
  EXPECT_EQ(p.lookup(1, -1), (VV{{2, 5}, {2, 3}}));
  EXPECT_EQ(p.lookup(4, -1), (VV{{1, 2}}));
  std::vector<int32_t> flat{99};
  EXPECT_EQ(p.lookup_into(1, 5, flat), 2);
  EXPECT_EQ(flat, (V{99, 2, 5, 2, 3}));
  NgramPool q(4, 2);
  q.insert_sequence(V{1, 2, 3});  // shorter than n: nothing
  EXPECT_EQ(q.size(), 0u);
}

TEST(DraftNgramPool, ZeroCapacityAndBadArguments) {
  NgramPool p(2, 0);
  p.insert(V{1, 2});
  EXPECT_EQ(p.size(), 0u);
  EXPECT_EQ(p.lookup(1, -1), VV{});
  EXPECT_THROW(NgramPool(1, 3), la::Error);
  EXPECT_THROW(NgramPool(3, -1), la::Error);
  NgramPool q(3, 2);
  EXPECT_THROW(q.insert(V{1, 2}), la::Error);
}

TEST(DraftNgramPool, MatchesReferenceOnRandomOperations) {
  std::mt19937 rng(7);
  const int n = 4, G = 5;
  NgramPool p(n, G);
  std::map<int32_t, std::list<V>> ref;  // most recent first
  size_t ref_size = 0;
  for (int it = 0; it < 20000; ++it) {
    V g(n);
    for (auto& t : g) t = static_cast<int32_t>(rng() % 4);
    p.insert(g);
    auto& l = ref[g[0]];
    V cont(g.begin() + 1, g.end());
    bool found = false;
    for (auto i = l.begin(); i != l.end(); ++i) {
      if (*i == cont) {
        l.erase(i);
        found = true;
        break;
      }
    }
    l.push_front(cont);
    if (!found) ++ref_size;
    if (l.size() > static_cast<size_t>(G)) {
      l.pop_back();
      --ref_size;
    }
    if (it % 97 == 0) {
      ASSERT_EQ(p.size(), ref_size);
      for (int32_t k = 0; k < 4; ++k) {
        VV want(ref[k].begin(), ref[k].end());
        ASSERT_EQ(p.lookup(k, -1), want);
        if (want.size() > 2) want.resize(2);
        ASSERT_EQ(p.lookup(k, 2), want);
      }
    }
  }
}

// ----------------------------------------------------------------------------------------------------------------
// PhrasePool

TEST(DraftPhrasePool, InsertRefreshEvict) {
  PhrasePool p(3);
  p.insert(V{1, 2, 3});
  p.insert(V{1, 4});
  p.insert(V{1, 5, 6, 7});
  p.insert(V{});  // ignored
  EXPECT_EQ(p.lookup(1, -1), (VV{{1, 5, 6, 7}, {1, 4}, {1, 2, 3}}));
  EXPECT_EQ(p.lookup(1, 1), (VV{{1, 5, 6, 7}}));
  p.insert(V{1, 2, 3});  // refresh
  EXPECT_EQ(p.lookup(1, -1), (VV{{1, 2, 3}, {1, 5, 6, 7}, {1, 4}}));
  EXPECT_EQ(p.size(), 3u);
  p.insert(V{1, 9});  // evicts {1,4}
  EXPECT_EQ(p.lookup(1, -1), (VV{{1, 9}, {1, 2, 3}, {1, 5, 6, 7}}));
  EXPECT_EQ(p.size(), 3u);
  p.insert(V{2});
  EXPECT_EQ(p.keys(), 2u);
  EXPECT_EQ(p.size(), 4u);
  EXPECT_TRUE(p.contains(V{1, 2, 3}));
  EXPECT_FALSE(p.contains(V{1, 4}));
  EXPECT_THROW(PhrasePool(-1), la::Error);
}

TEST(DraftPhrasePool, ReplaceCorrectsStalePhrase) {
  PhrasePool p(4);
  p.insert(V{1, 2, 3, 4});
  p.insert(V{1, 7});
  p.replace(V{1, 2, 3, 4}, V{1, 2, 3, 5});
  EXPECT_EQ(p.lookup(1, -1), (VV{{1, 2, 3, 5}, {1, 7}}));
  EXPECT_EQ(p.size(), 2u);
  // Stale phrase absent: the correction is simply inserted.
  p.replace(V{1, 8, 8}, V{1, 8, 9});
  EXPECT_EQ(p.lookup(1, -1), (VV{{1, 8, 9}, {1, 2, 3, 5}, {1, 7}}));
  // Correction with another key moves the phrase to that key.
  p.replace(V{1, 7}, V{3, 7});
  EXPECT_EQ(p.lookup(1, -1), (VV{{1, 8, 9}, {1, 2, 3, 5}}));
  EXPECT_EQ(p.lookup(3, -1), (VV{{3, 7}}));
  // Replacing a phrase by itself refreshes it.
  p.replace(V{1, 2, 3, 5}, V{1, 2, 3, 5});
  EXPECT_EQ(p.lookup(1, -1), (VV{{1, 2, 3, 5}, {1, 8, 9}}));
  EXPECT_EQ(p.size(), 3u);
  EXPECT_TRUE(p.remove(V{3, 7}));
  EXPECT_FALSE(p.remove(V{3, 7}));
  EXPECT_EQ(p.keys(), 1u);
}

TEST(DraftPhrasePool, SaveLoadRoundTrip) {
  TempDir td("la_pool");
  const std::string f = td.path("phrases.bin");
  std::mt19937 rng(3);
  PhrasePool p(6);
  for (int i = 0; i < 3000; ++i) {
    V ph(1 + rng() % 6);
    for (auto& t : ph) t = static_cast<int32_t>(rng() % 50);
    p.insert(ph);
  }
  p.save(f);
  EXPECT_EQ(std::distance(fs::directory_iterator(td.dir), fs::directory_iterator()), 1);  // no temp file left
  PhrasePool q(6);
  q.insert(V{999, 1});  // replaced by the load
  q.load(f);
  EXPECT_EQ(q.size(), p.size());
  EXPECT_EQ(q.keys(), p.keys());
  EXPECT_FALSE(q.contains(V{999, 1}));
  for (int32_t k = 0; k < 50; ++k) EXPECT_EQ(q.lookup(k, -1), p.lookup(k, -1)) << "key " << k;
  // A smaller pool keeps the most recent phrases of each key.
  PhrasePool r(2);
  r.load(f);
  for (int32_t k = 0; k < 50; ++k) EXPECT_EQ(r.lookup(k, -1), p.lookup(k, 2)) << "key " << k;
  // Saving over an existing file replaces it.
  PhrasePool e(3);
  e.save(f);
  q.load(f);
  EXPECT_EQ(q.size(), 0u);
}

TEST(DraftPhrasePool, BadStateFilesThrowNamingTheFile) {
  TempDir td("la_pool");
  const std::string f = td.path("pool.bin");
  PhrasePool p(4);
  p.insert(V{1, 2, 3});
  p.insert(V{4, 5});
  p.save(f);
  const std::string good = read_bytes(f);
  PhrasePool q(4);

  const std::string missing = td.path("nope.bin");
  expect_error([&] { q.load(missing); }, missing, "cannot open");

  write_bytes(f, good.substr(0, good.size() - 5));
  expect_error([&] { q.load(f); }, f, "checksum");
  write_bytes(f, good.substr(0, 10));
  expect_error([&] { q.load(f); }, f, "truncated");
  write_bytes(f, "");
  expect_error([&] { q.load(f); }, f, "truncated");

  std::string bad = good;
  bad[0] = 'X';
  write_bytes(f, bad);
  expect_error([&] { q.load(f); }, f, "wrong magic");

  bad = good;
  bad[8] = 7;  // version
  write_bytes(f, bad);
  expect_error([&] { q.load(f); }, f, "version");

  bad = good;
  bad[good.size() / 2] ^= 0x40;
  write_bytes(f, bad);
  expect_error([&] { q.load(f); }, f, "checksum");

  EXPECT_EQ(q.size(), 0u);  // failed loads leave the pool untouched
  write_bytes(f, good);
  q.load(f);
  EXPECT_EQ(q.lookup(1, -1), (VV{{1, 2, 3}}));
}
