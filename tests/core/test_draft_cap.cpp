// The batch's draft cap (draft_cap.h) on synthetic returns: every cap is tried (the largest first), then the cap
// whose steps returned the most tokens per second runs, other caps get a window now and then and a change of the
// returns is followed; each count of deciding requests keeps its own returns; a lone request is never capped.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "lookahead/decode/draft_cap.h"
#include "lookahead/util/error.h"

using namespace la;

namespace {

const std::vector<int> kLadder{0, 1, 2, 3, 4, 6, 8, 12, 16};

// Tokens per second each cap's steps return, for `deciding` requests.
using Returns = std::map<int, double>;

// Runs `steps` steps of `deciding` requests; each returns rate(cap) tokens over 10 ms. Caps chosen, in order.
std::vector<int> run(DraftCap& d, int deciding, int steps, const Returns& rate) {
  std::vector<int> chosen;
  for (int i = 0; i < steps; ++i) {
    const int cap = d.choose(deciding);
    chosen.push_back(cap);
    d.observe(rate.at(cap) * 0.01, 0.01);
  }
  return chosen;
}

int count(const std::vector<int>& v, int cap, size_t from = 0) {
  int n = 0;
  for (size_t i = from; i < v.size(); ++i) n += v[i] == cap;
  return n;
}

TEST(DraftCap, TriesEveryCapThenRunsTheBestAndStillLooksAtTheOthers) {
  DraftCap d(kLadder, 4);
  EXPECT_EQ(d.caps(), (std::vector<int>{1, 2, 4, 16}));
  const Returns r{{1, 150}, {2, 140}, {4, 120}, {16, 110}};
  const auto c = run(d, 4, 1000, r);
  const int w = DraftCapOptions{}.window;
  // The first windows: the largest cap (as without a cap), then down.
  for (int i = 0; i < 4 * w; ++i) EXPECT_EQ(c[size_t(i)], (std::vector<int>{16, 4, 2, 1})[size_t(i / w)]) << i;
  EXPECT_GT(count(c, 1, size_t(4 * w)), 850);
  for (int cap : {2, 4, 16}) EXPECT_GT(count(c, cap, size_t(4 * w)), 0) << "cap " << cap << " never looked at again";
  // No cap (110) is more than 20% below the best (150): looked at less often than cap 2 (140).
  EXPECT_LT(count(c, 16, size_t(4 * w)), count(c, 2, size_t(4 * w)));
  EXPECT_NEAR(d.rate(4, 0), 150, 1e-9);
  EXPECT_NEAR(d.rate(4, 3), 110, 1e-9);
}

// A smaller cap must beat the larger by DraftCapOptions::margin (3%): within it, the larger runs.
TEST(DraftCap, ASmallerCapMustWinByTheMargin) {
  DraftCap d(kLadder, 4);
  const auto c = run(d, 4, 400, {{1, 102}, {2, 101}, {4, 100.5}, {16, 100}});
  EXPECT_GT(count(c, 16, 32), 300);
  DraftCap e(kLadder, 4);
  const auto f = run(e, 4, 400, {{1, 104}, {2, 101}, {4, 100.5}, {16, 100}});
  EXPECT_GT(count(f, 1, 32), 300);
}

TEST(DraftCap, FollowsAChangeOfTheReturns) {
  DraftCap d(kLadder, 4);
  run(d, 4, 600, {{1, 150}, {2, 140}, {4, 120}, {16, 110}});
  // Short drafts stop paying, whole ones pay: within a few hundred steps the largest cap runs.
  const auto c = run(d, 4, 800, {{1, 60}, {2, 80}, {4, 100}, {16, 160}});
  EXPECT_GT(count(c, 16, 400), 320);
}

TEST(DraftCap, EachCountOfDecidingRequestsLearnsItsOwn) {
  DraftCap d(kLadder, 8);
  for (int i = 0; i < 20; ++i) {
    run(d, 2, 50, {{1, 50}, {2, 60}, {4, 70}, {16, 90}});
    run(d, 8, 50, {{1, 300}, {2, 250}, {4, 200}, {16, 150}});
  }
  const auto two = run(d, 2, 90, {{1, 50}, {2, 60}, {4, 70}, {16, 90}});
  const auto eight = run(d, 8, 90, {{1, 300}, {2, 250}, {4, 200}, {16, 150}});
  EXPECT_GE(count(two, 16), 80);
  EXPECT_GE(count(eight, 1), 80);
}

TEST(DraftCap, ALoneRequestIsNeverCappedNorIsAStrategyWithoutDrafts) {
  DraftCap d(kLadder, 4);
  EXPECT_EQ(d.choose(1), -1);
  EXPECT_EQ(d.choose(0), -1);
  EXPECT_EQ(d.choose(5), -1);  // more than the batch's slots: not a step this runner makes
  d.observe(1, 0.01);          // nothing chosen: nothing booked
  EXPECT_EQ(d.steps_at(3), 0);
  DraftCap none({0}, 4);
  EXPECT_TRUE(none.caps().empty());
  EXPECT_EQ(none.choose(4), -1);
  DraftCap small({0, 1, 2}, 4);  // caps below the ladder's top only
  EXPECT_EQ(small.caps(), (std::vector<int>{1, 2}));
  EXPECT_THROW(DraftCap(kLadder, 4, DraftCapOptions{0, 96, 1.0 / 256}), Error);
}

// The caps of 1 and 2 are exact (every deciding request drafts the cap: DraftController::set_cap's `exact`), the
// cap of 2 only while its forced rows (2 per request) stay within exact_rows; the others bound the controllers'
// choices. The names in the reports say which.
TEST(DraftCap, TheSmallCapsAreExactAndNamedSo) {
  DraftCap d(kLadder, 16);
  EXPECT_EQ(d.caps(), (std::vector<int>{1, 2, 4, 16}));
  EXPECT_TRUE(d.exact(1, 2));
  EXPECT_TRUE(d.exact(1, 16)) << "one token a request is exact at every batch size";
  EXPECT_TRUE(d.exact(2, 2));
  EXPECT_TRUE(d.exact(2, 4));
  EXPECT_FALSE(d.exact(2, 5)) << "10 forced rows: above exact_rows (8), a bound";
  EXPECT_FALSE(d.exact(2, 8));
  EXPECT_FALSE(d.exact(4, 2));
  EXPECT_FALSE(d.exact(16, 2));
  EXPECT_FALSE(d.exact(-1, 2));
  std::vector<std::string> names;
  for (size_t a = 0; a < d.caps().size(); ++a) names.push_back(d.label(a));
  EXPECT_EQ(names, (std::vector<std::string>{"=1", "=2", "4", "none"}));
  DraftCapOptions o;
  o.exact_upto = 0;
  DraftCap bound(kLadder, 4, o);
  EXPECT_FALSE(bound.exact(1, 2));
  EXPECT_EQ(bound.label(0), "1");
  EXPECT_EQ(bound.label(1), "2");
  DraftCapOptions few;
  few.exact_rows = 3;  // no D >= 2 keeps two tokens a request within 3 rows: the cap of 2 is a bound everywhere
  DraftCap small(kLadder, 4, few);
  EXPECT_FALSE(small.exact(2, 2));
  EXPECT_EQ(small.label(1), "2");
  EXPECT_TRUE(small.exact(1, 4));
  DraftCap one({0, 1}, 4);  // a ladder whose top is 1: no cap below it, the top is never exact
  EXPECT_TRUE(one.caps().size() == 1 && !one.exact(1, 2));
}

}  // namespace
