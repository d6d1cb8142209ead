// The one verifier on hand-built trees: branching, ties between equal children, a rejected root child, lookahead
// nodes never accepted, and eos (an ordinary token for the verifier: the step runner cuts the request there).
#include <gtest/gtest.h>

#include <vector>

#include "lookahead/decode/step_plan.h"
#include "lookahead/util/error.h"

using V = std::vector<int32_t>;

namespace {

la::StepPlan tree(int32_t root, const std::vector<std::tuple<int32_t, int32_t, bool>>& nodes) {
  la::StepPlan p;
  p.reset(root);
  for (const auto& [tok, parent, draft] : nodes) p.add(tok, parent, draft);
  p.validate();
  return p;
}

}  // namespace

TEST(VerifyPlan, FollowsTheMatchingBranch) {
  //        root(9)
  //       /       \   (tree)
  //    1:a(10)   2:b(11)
  //      |         |
  //    3:c(12)   4:d(13)
  const auto p = tree(9, {{10, 0, true}, {11, 0, true}, {12, 1, true}, {13, 2, true}});
  // The model says b after the root, d after b, 7 after d: the right branch in full plus the bonus token.
  auto v = la::verify_plan(p, V{11, 99, 13, 99, 7});
  EXPECT_EQ(v.path, (V{0, 2, 4}));
  EXPECT_EQ(v.tokens, (V{11, 13, 7}));
  // The left branch, rejected at its second node: a, then the model's token after a.
  v = la::verify_plan(p, V{10, 5, 99, 99, 99});
  EXPECT_EQ(v.path, (V{0, 1}));
  EXPECT_EQ(v.tokens, (V{10, 5}));
}

TEST(VerifyPlan, RejectedRootChildYieldsTheModelsToken) {
  const auto p = tree(9, {{10, 0, true}, {11, 1, true}});
  const auto v = la::verify_plan(p, V{4, 11, 12});
  EXPECT_EQ(v.path, (V{0}));
  EXPECT_EQ(v.tokens, (V{4}));
}

TEST(VerifyPlan, TiesGoToTheFirstChildInPlanOrder) {
  // Two children with the same token: the first wins even where the second would have matched deeper.
  const auto p = tree(9, {{10, 0, true}, {10, 0, true}, {12, 2, true}});
  const auto v = la::verify_plan(p, V{10, 3, 12, 8});
  EXPECT_EQ(v.path, (V{0, 1}));
  EXPECT_EQ(v.tokens, (V{10, 3}));
  // The allocation-free form reuses the verdict and gives the same answer.
  la::Verdict w;
  w.path = {7, 7, 7, 7, 7};
  la::verify_plan(p, V{10, 3, 12, 8}, w);
  EXPECT_EQ(w.path, v.path);
  EXPECT_EQ(w.tokens, v.tokens);
}

TEST(VerifyPlan, LookaheadNodesAreNeverAccepted) {
  // A lookahead node (LADE's window) with the model's token is skipped; the draft node after it is reached
  // only through draft nodes.
  const auto p = tree(9, {{10, 0, false}, {10, 0, true}, {11, 2, true}});
  const auto v = la::verify_plan(p, V{10, 11, 11, 6});
  EXPECT_EQ(v.path, (V{0, 2, 3}));
  EXPECT_EQ(v.tokens, (V{10, 11, 6}));
}

TEST(VerifyPlan, EosIsAnOrdinaryTokenForTheVerifier) {
  // The verdict runs through an eos (2); cutting the request there is the step runner's job (test_oracle_strategies).
  const auto p = tree(9, {{2, 0, true}, {5, 1, true}});
  const auto v = la::verify_plan(p, V{2, 5, 6});
  EXPECT_EQ(v.tokens, (V{2, 5, 6}));
}

TEST(VerifyPlan, ResultsMustCoverThePlan) {
  const auto p = tree(9, {{10, 0, true}});
  EXPECT_THROW(la::verify_plan(p, V{10}), la::Error);
}
