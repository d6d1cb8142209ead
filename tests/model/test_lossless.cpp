// Lossless: every strategy, with several parameter settings (edge values included), emits exactly the tokens of
// plain greedy decoding (fp32, CPU), on the shared models and random models of other shapes, over a sequence of
// prompts in one process (warm pools and tries).
#include <gtest/gtest.h>

#include "common.h"

using namespace la;
using namespace la::test;

namespace {

struct Case {
  std::string label;
  StrategyOptions opt;
  // Never: the settings cannot draft (Jacobi block 0, G = 0, decoding length 0, branch length 1).
  // Trained: a draft is accepted somewhere on the trained models only. Jacobi confirms a guess on random weights
  // too rarely to assert (measured with the CLI on these prompts: tiny-gqa-bias, block 1, accepted 1 draft in 936
  // tokens; stories260K 108 in 2376, llama2xs 72 in 2186). Always: on every model (the fewest on the random
  // models, same measurement: 60 drafts in 936 tokens, trie_len1 on tiny-mha).
  enum Drafts { Never, Trained, Always } drafts = Always;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  auto add = [&](std::string label, auto f, Case::Drafts drafts = Case::Always) {
    StrategyOptions o;
    f(o);
    c.push_back({std::move(label), o, drafts});
  };
  add("jacobi_16", [](auto& o) { o.name = "jacobi"; }, Case::Trained);
  add("jacobi_1", [](auto& o) { o.name = "jacobi"; o.jacobi.block = 1; }, Case::Trained);
  add("jacobi_0", [](auto& o) { o.name = "jacobi"; o.jacobi.block = 0; }, Case::Never);
  add("lade_default", [](auto& o) { o.name = "lade"; });
  add("lade_N2_W1_G1", [](auto& o) { o.name = "lade"; o.lade.ngram = 2; o.lade.window = 1; o.lade.guesses = 1; });
  add("lade_W1_G0", [](auto& o) { o.name = "lade"; o.lade.window = 1; o.lade.guesses = 0; }, Case::Never);
  add("lade_N3_W5_G1", [](auto& o) { o.name = "lade"; o.lade.ngram = 3; o.lade.window = 5; o.lade.guesses = 1; });
  add("lade_N4_W7_G7_prompt", [](auto& o) { o.name = "lade"; o.lade.ngram = 4; o.lade.window = 7; o.lade.guesses = 7; o.lade.pool_from_prompt = true; o.seed = 9; });
  add("trie_default", [](auto& o) { o.name = "trie"; });
  add("trie_parallel", [](auto& o) { o.name = "trie"; o.trie.mode = "parallel"; o.trie.decoding_length = 24; });
  add("trie_len1", [](auto& o) { o.name = "trie"; o.trie.decoding_length = 1; });
  add("trie_branch1", [](auto& o) { o.name = "trie"; o.trie.branch_length = 1; }, Case::Never);
  add("trie_len0", [](auto& o) { o.name = "trie"; o.trie.decoding_length = 0; }, Case::Never);
  add("trie_small_capacity", [](auto& o) { o.name = "trie"; o.trie.decoding_length = 16; o.trie.capacity = 40; });
  add("prompt_lookup", [](auto& o) { o.name = "prompt-lookup"; });
  add("prompt_lookup_1_1_1", [](auto& o) { o.name = "prompt-lookup"; o.pl.min_ngram = 1; o.pl.max_ngram = 1; o.pl.num_tokens = 1; });
  add("prompt_lookup_2_5_20", [](auto& o) { o.name = "prompt-lookup"; o.pl.min_ngram = 2; o.pl.max_ngram = 5; o.pl.num_tokens = 20; });
  add("suffix_default", [](auto& o) { o.name = "suffix"; });
  add("suffix_d4_t4_p03", [](auto& o) { o.name = "suffix"; o.suffix.depth = 4; o.suffix.max_tokens = 4; o.suffix.factor = 1; o.suffix.min_prob = 0.3; });
  add("suffix_local_only_t64", [](auto& o) { o.name = "suffix"; o.suffix.global_mb = 0; o.suffix.max_tokens = 64; o.suffix.depth = 64; o.suffix.factor = 8; o.suffix.min_prob = 0; });
  add("suffix_t0", [](auto& o) { o.name = "suffix"; o.suffix.max_tokens = 0; }, Case::Never);
  return c;
}

struct ModelCase {
  std::string label, path;
  int prompts;
};

void PrintTo(const ModelCase& m, std::ostream* os) { *os << m.label; }

class Lossless : public ::testing::TestWithParam<ModelCase> {};

TEST_P(Lossless, EveryStrategyEqualsPlainGreedy) {
  const auto mc = GetParam();
  auto m = load_llama({mc.path, "fp32", "cpu", 0, 0});
  auto ps = prompt_ids(mc.prompts, m->config().vocab);
  GenParams gp;
  gp.max_new_tokens = 72;
  auto ar = make_ar_strategy();
  auto want = run_all(*m, *ar, ps, gp);
  for (const auto& c : cases()) {
    auto s = make_strategy(c.opt);
    RequestStats st;
    auto got = run_all(*m, *s, ps, gp, &st);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << mc.label << " / " << c.label << " prompt " << i;
    }
    // The strategies must actually do something: over these prompts (the repetitive texts included) a strategy
    // that can draft accepts a draft at some step (fewer steps than tokens; plain decoding fails this), and one
    // that cannot takes exactly one step per token. Greedy and deterministic: not flaky.
    const bool trained = mc.path.rfind("random:", 0) != 0;
    if (c.drafts == Case::Never) { EXPECT_EQ(st.steps, st.new_tokens) << mc.label << " / " << c.label; }
    else if (c.drafts == Case::Always || trained)
      EXPECT_LT(st.steps, st.new_tokens) << mc.label << " / " << c.label << ": no draft ever accepted";
    else EXPECT_LE(st.steps, st.new_tokens) << mc.label << " / " << c.label;
    std::printf("  %-14s %-24s S=%.2f steps=%d tokens=%d\n", mc.label.c_str(), c.label.c_str(), st.compression(),
                st.steps, st.new_tokens);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Lossless,
                         ::testing::Values(ModelCase{"stories260K", stories(), 30}, ModelCase{"llama2xs", llama2xs(), 30},
                                           ModelCase{"mha", "random:tiny-mha:11", 10},
                                           ModelCase{"gqa_bias", "random:tiny-gqa-bias:12", 10}),
                         [](const auto& info) { return info.param.label; });

// Adaptive drafting: every strategy, with the cost model calibrated on this machine (budgets mix, by timing) and
// forced to the extremes: flat (every step drafts the largest budget) and steep (every step is plain). Outputs
// equal plain decoding in all three; the extremes are asserted on the chosen-budget statistics.
TEST(LosslessAdaptive, EveryStrategyAndCostShapeEqualsPlainGreedy) {
  for (auto path : {stories(), llama2xs()}) {
    auto m = load_llama({path, "fp32", "cpu", 0, 0});
    auto ps = prompt_ids(8, m->config().vocab);  // 8 stories + 3 repetitive texts
    GenParams gp;
    gp.max_new_tokens = 48;
    auto ar = make_ar_strategy();
    auto want = run_all(*m, *ar, ps, gp);
    for (const auto& c : cases()) {
      if (c.label != "jacobi_16" && c.label != "lade_default" && c.label != "lade_N4_W7_G7_prompt" &&
          c.label != "trie_default" && c.label != "trie_parallel" && c.label != "prompt_lookup" &&
          c.label != "suffix_default")
        continue;
      for (auto shape : {CostShape::Calibrated, CostShape::Flat, CostShape::Steep, CostShape::Tiny}) {
        auto s = make_strategy(c.opt);
        RequestStats st;
        auto got = run_all_adaptive(*m, *s, ps, gp, shape, &st);
        ASSERT_EQ(got, want) << path << " / " << c.label << " shape " << int(shape);
        const int top = s->max_draft_budget();
        ASSERT_GT(top, 0);
        EXPECT_EQ(st.budgets.steps, st.steps);
        if (shape == CostShape::Flat) { EXPECT_EQ(st.budgets.budget_hist[top], st.steps) << c.label; }
        if (shape == CostShape::Steep) { EXPECT_EQ(st.budgets.plain_steps, st.steps) << c.label; }
        if (shape == CostShape::Steep) { EXPECT_EQ(st.steps, st.new_tokens) << c.label; }
        if (shape == CostShape::Tiny) {  // asleep and awake again: the sync on waking was exercised
          EXPECT_GT(st.budgets.dormant_steps, 0) << c.label;
          EXPECT_GT(st.budgets.sleeps, 0) << c.label;  // counted at the booking or charge that put it to sleep
          // Not the trie: its bookkeeping (every prompt and output inserted at each request's begin and end)
          // outweighs what a Tiny step's allowance refills for good, so it sleeps within its first 2 steps, or
          // before the first when the first prompt's insertion alone took more than the credit (2 us), and stays
          // asleep (the bound at work: 526-528 of 528 steps on stories260K). The others wake and sleep again.
          if (c.opt.name != "trie") {
            EXPECT_LT(st.budgets.dormant_steps, st.steps) << c.label;
          }
        }
        std::printf("  %-28s %-24s shape %d S=%.2f plain=%lld/%lld\n", path.substr(path.rfind('/') + 1).c_str(),
                    c.label.c_str(), int(shape), st.compression(), (long long)st.budgets.plain_steps,
                    (long long)st.budgets.steps);
        if (shape == CostShape::Tiny)
          std::printf("    dormant %lld, sleeps %lld\n", (long long)st.budgets.dormant_steps, (long long)st.budgets.sleeps);
      }
    }
  }
}

// The context limit: strategies that plan deep trees near max positions stay exact and stop at the limit.
TEST(LosslessContext, NearContextLimit) {
  auto m = load_llama({llama2xs(), "fp32", "cpu", 0, 0});  // 256 positions
  auto ps = prompt_ids(3, m->config().vocab);
  GenParams gp;
  gp.max_new_tokens = 0;  // until eos or the context limit
  auto ar = make_ar_strategy();
  auto want = run_all(*m, *ar, ps, gp);
  for (auto name : {"lade", "trie", "jacobi", "prompt-lookup", "suffix"}) {
    StrategyOptions o;
    o.name = name;
    auto s = make_strategy(o);
    EXPECT_EQ(run_all(*m, *s, ps, gp), want) << name;
  }
}

}  // namespace
