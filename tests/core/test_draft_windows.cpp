// LADE's 2D window and Jacobi's block, driven by hand through the Strategy interface: the plan's layout, the
// window's shift, the n-grams harvested into the pool (seen as the next plan's verification candidates) and the
// guesses carried over.
#include <gtest/gtest.h>

#include <vector>

#include "lookahead/decode/strategies.h"

using V = std::vector<int32_t>;

namespace {

la::Verdict verdict(V path, V tokens) {
  la::Verdict v;
  v.path = std::move(path);
  v.tokens = std::move(tokens);
  return v;
}

}  // namespace

TEST(LadeWindow, WarmUpShiftAndHarvest) {
  la::StrategyOptions o;
  o.name = "lade";
  o.lade.window = 2;
  o.lade.ngram = 3;
  o.lade.guesses = 2;
  auto s = la::make_lade_strategy(o);
  s->begin_request(V{7, 7, 7});  // level 0 is drawn from the prompt: [7, 7]
  la::StepPlan p;
  // Step 1 (warm-up, one level): the root and level 0 as a chain; the pool is empty.
  s->plan(V{7, 7, 7}, 100, p);
  EXPECT_EQ(p.tokens, (V{7, 7, 7}));
  EXPECT_EQ(p.parents, (V{-1, 0, 1}));
  EXPECT_EQ(p.draft, (std::vector<uint8_t>{1, 0, 0}));
  s->update(V{7, 7, 7}, p, V{9, 20, 21}, verdict({0}, {9}));  // level 1 := the outputs of level 0: [20, 21]
  // Step 2 (window full): level 1 of column j hangs off level 0 of column j.
  s->plan(V{7, 7, 7, 9}, 100, p);
  EXPECT_EQ(p.tokens, (V{9, 7, 7, 20, 21}));
  EXPECT_EQ(p.parents, (V{-1, 0, 1, 1, 2}));
  EXPECT_EQ(p.num_lookahead(), 4);
  EXPECT_EQ(p.num_draft(), 0);
  // Its outputs at the top level (30, 31) complete the n-grams (7 20 30) and (7 21 31); the window shifts up.
  s->update(V{7, 7, 7, 9}, p, V{7, 0, 0, 30, 31}, verdict({0}, {7}));
  // Step 3, root 7: window [20 21 / 30 31], then the pool's n-grams for 7, most recent first, as verify chains.
  s->plan(V{7, 7, 7, 9, 7}, 100, p);
  EXPECT_EQ(p.tokens, (V{7, 20, 21, 30, 31, 21, 31, 20, 30}));
  EXPECT_EQ(p.parents, (V{-1, 0, 1, 1, 2, 0, 5, 0, 7}));
  EXPECT_EQ(p.draft, (std::vector<uint8_t>{1, 0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(s->counters().at("pool_ngrams"), 2);
  // The depth bound cuts the window and the candidates alike (depth 1: level 0's first column, 1 token each).
  s->plan(V{7, 7, 7, 9, 7}, 1, p);
  EXPECT_EQ(p.tokens, (V{7, 20, 21, 20}));
  EXPECT_EQ(p.parents, (V{-1, 0, 0, 0}));
  // A budget of one n-gram plans one window column and the first candidate; the column not run keeps its state.
  s->set_draft_budget(2);
  s->plan(V{7, 7, 7, 9, 7}, 100, p);
  EXPECT_EQ(p.tokens, (V{7, 20, 30, 21, 31}));
  EXPECT_EQ(p.parents, (V{-1, 0, 1, 0, 3}));
  s->update(V{7, 7, 7, 9, 7}, p, V{0, 0, 40, 0, 0}, verdict({0}, {0}));  // column 0: (20 30 40)
  s->set_draft_budget(-1);
  s->plan(V{7, 7, 7, 9, 7, 20}, 100, p);
  EXPECT_EQ(p.tokens, (V{20, 30, 21, 40, 31, 30, 40}));  // column 1 still [21 / 31]; 20's n-gram (30 40)
}

TEST(JacobiBlock, GuessesAreTheOutputsAfterTheAcceptedPrefix) {
  la::StrategyOptions o;
  o.name = "jacobi";
  o.jacobi.block = 3;
  auto s = la::make_jacobi_strategy(o);
  s->begin_request(V{7, 7, 7});  // guesses padded from the prompt: [7, 7, 7]
  la::StepPlan p;
  s->plan(V{7, 7, 9}, 100, p);
  EXPECT_EQ(p.tokens, (V{9, 7, 7, 7}));
  EXPECT_EQ(p.parents, (V{-1, 0, 1, 2}));
  // Guess 0 accepted (the model said 7 after 9), then 40 instead of 7: the new guesses are the outputs after the
  // accepted point (41, 42), padded from the prompt.
  s->update(V{7, 7, 9}, p, V{7, 40, 41, 42}, verdict({0, 1}, {7, 40}));
  s->plan(V{7, 7, 9, 7, 40}, 100, p);
  EXPECT_EQ(p.tokens, (V{40, 41, 42, 7}));
  // The depth bound limits the block.
  s->plan(V{7, 7, 9, 7, 40}, 1, p);
  EXPECT_EQ(p.tokens, (V{40, 41}));
}
