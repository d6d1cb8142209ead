// Tree steps: every node of a random tree on top of a non-empty cache gets the logits of its root-to-node path
// run as a plain sequence; committing a path and continuing equals plain decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lookahead/engine/llama.h"

using namespace la;

namespace {

std::vector<std::string> models() {
  const std::string s = LA_SHARED_DIR;
  return {s + "/models/stories260K", s + "/models/llama2xs", "random:tiny-mha:3", "random:tiny-gqa-bias:4",
          "random:stories260k:5", "random:tiny-wide:6"};
}

// Logits of running `seq` from scratch as one chain; returns the last position's logits.
std::vector<float> chain_logits(StepModel& m, const std::vector<int32_t>& seq) {
  m.truncate(0);
  StepInput in;
  for (size_t i = 0; i < seq.size(); ++i) {
    in.tokens.push_back(seq[i]);
    in.positions.push_back(static_cast<int32_t>(i));
    in.parents.push_back(static_cast<int32_t>(i) - 1);
  }
  std::vector<float> lg;
  m.forward(in, SampleParams{}, &lg);
  const int V = m.config().vocab;
  return std::vector<float>(lg.end() - V, lg.end());
}

void prefill(StepModel& m, const std::vector<int32_t>& ctx) {
  m.truncate(0);
  StepInput in;
  std::vector<int32_t> idx;
  for (size_t i = 0; i < ctx.size(); ++i) {
    in.tokens.push_back(ctx[i]);
    in.positions.push_back(static_cast<int32_t>(i));
    in.parents.push_back(static_cast<int32_t>(i) - 1);
    idx.push_back(static_cast<int32_t>(i));
  }
  m.forward(in, SampleParams{});
  m.commit(idx);
}

}  // namespace

class TreeStep : public ::testing::TestWithParam<std::string> {};

TEST_P(TreeStep, NodeLogitsEqualPathAsSequence) {
  auto m = load_llama({GetParam(), "fp32", "cpu", 0, 0});
  const int V = m->config().vocab;
  std::mt19937 rng(42);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<int32_t> ctx;
    const int L = 3 + trial * 7;
    for (int i = 0; i < L; ++i) ctx.push_back(rng() % V);
    // random tree of T tokens with random parents (-1 for some roots: they attend to the cache only)
    const int T = 5 + trial * 9;
    StepInput tree;
    std::vector<int> depth(T);
    for (int i = 0; i < T; ++i) {
      const int p = i == 0 ? -1 : static_cast<int>(rng() % (i + 1)) - 1;
      tree.parents.push_back(p);
      depth[i] = p < 0 ? 0 : depth[p] + 1;
      tree.tokens.push_back(rng() % V);
      tree.positions.push_back(L + depth[i]);
    }
    prefill(*m, ctx);
    std::vector<float> lg;
    m->forward(tree, SampleParams{}, &lg);
    ASSERT_EQ(lg.size(), static_cast<size_t>(T) * V);
    for (int i = 0; i < T; ++i) {
      std::vector<int32_t> path;
      for (int a = i; a >= 0; a = tree.parents[a]) path.insert(path.begin(), tree.tokens[a]);
      auto seq = ctx;
      seq.insert(seq.end(), path.begin(), path.end());
      auto want = chain_logits(*m, seq);
      double maxdiff = 0, maxabs = 0;
      for (int v = 0; v < V; ++v) {
        maxdiff = std::max(maxdiff, std::abs(double(lg[size_t(i) * V + v]) - want[v]));
        maxabs = std::max(maxabs, std::abs(double(want[v])));
      }
      EXPECT_LE(maxdiff, 1e-5 * std::max(1.0, maxabs)) << GetParam() << " trial " << trial << " node " << i;
    }
  }
}

TEST_P(TreeStep, CommitPathThenContinueEqualsPlainDecoding) {
  auto m = load_llama({GetParam(), "fp32", "cpu", 0, 0});
  const int V = m->config().vocab;
  std::mt19937 rng(7);
  std::vector<int32_t> ctx;
  for (int i = 0; i < 6; ++i) ctx.push_back(rng() % V);
  // plain greedy decoding of 12 tokens
  prefill(*m, std::vector<int32_t>(ctx.begin(), ctx.end() - 1));
  std::vector<int32_t> plain = ctx;
  for (int s = 0; s < 12; ++s) {
    StepInput in{{plain.back()}, {static_cast<int32_t>(plain.size()) - 1}, {-1}};
    auto r = m->forward(in, SampleParams{});
    m->commit({0});
    plain.push_back(r[0]);
  }
  // tree step: root (last ctx token) with a branch holding the true continuation and decoys
  prefill(*m, std::vector<int32_t>(ctx.begin(), ctx.end() - 1));
  StepInput tree;
  const int P = static_cast<int>(ctx.size()) - 1;
  tree.tokens = {ctx.back()};
  tree.positions = {P};
  tree.parents = {-1};
  // decoy child, true chain of 4, decoy grandchild
  tree.tokens.push_back((plain[P + 1] + 1) % V), tree.positions.push_back(P + 1), tree.parents.push_back(0);
  int par = 0;
  std::vector<int32_t> path{0};
  for (int k = 1; k <= 4; ++k) {
    tree.tokens.push_back(plain[P + k]);
    tree.positions.push_back(P + k);
    tree.parents.push_back(par);
    par = static_cast<int>(tree.tokens.size()) - 1;
    path.push_back(par);
    tree.tokens.push_back((plain[P + k + 1] + 3) % V), tree.positions.push_back(P + k + 1), tree.parents.push_back(par);
  }
  auto r = m->forward(tree, SampleParams{});
  for (int k = 0; k < 4; ++k) EXPECT_EQ(r[path[k]], plain[P + k + 1]);
  m->commit(path);
  std::vector<int32_t> seq(plain.begin(), plain.begin() + P + 5);
  EXPECT_EQ(m->cache_len(), P + 5);
  for (int s = 0; s < 7; ++s) {
    StepInput in{{r[path.back()]}, {static_cast<int32_t>(seq.size())}, {-1}};
    seq.push_back(r[path.back()]);
    r = m->forward(in, SampleParams{});
    m->commit({0});
    path = {0};
  }
  seq.push_back(r[0]);
  std::vector<int32_t> want(plain.begin(), plain.begin() + seq.size());
  EXPECT_EQ(seq, want);
}

INSTANTIATE_TEST_SUITE_P(Models, TreeStep, ::testing::ValuesIn(models()), [](const auto& info) {
  std::string n = info.param.substr(info.param.find_last_of("/:") + 1);
  std::string s = info.param.rfind("random:", 0) == 0 ? "random_" + info.param.substr(7) : n;
  for (auto& c : s) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
});
