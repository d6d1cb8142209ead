// Sampling: every strategy's output distribution is the model's own. For each strategy the first generated
// tokens over many seeds are compared with plain sampling over *other* seeds by a two-sample chi-square test
// (alpha = 1e-4 per position; deterministic given the seeds). A deliberately biased verifier must fail it.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common.h"

using namespace la;
using namespace la::test;

namespace {

constexpr int kSeeds = 400;
constexpr int kTokens = 4;

// samples[s][k]: k-th generated token of the run with seed base+s.
std::vector<std::vector<int32_t>> sample_runs(StepModel& m, Strategy& s, const std::vector<int32_t>& prompt,
                                              GenParams gp, uint64_t base,
                                              std::function<Verdict(const StepPlan&, const std::vector<int32_t>&)> ver = {},
                                              DraftController* ctl = nullptr, StepCostModel* cost = nullptr) {
  LocalExecutor ex(m);
  Generator g(ex, s, m.config());
  if (ver) g.set_verifier(ver);
  if (ctl) g.set_controller(ctl);
  (void)cost;  // the controller's cost model: the step runner feeds it
  std::vector<std::vector<int32_t>> out;
  gp.max_new_tokens = kTokens;
  for (int i = 0; i < kSeeds; ++i) {
    gp.sample.seed = base + i;
    auto r = g.generate(prompt, gp);
    r.ids.resize(kTokens, -1);  // eos early: pad with a sentinel category
    out.push_back(r.ids);
  }
  return out;
}

// Two-sample chi-square statistic for equal sample sizes, with sparse categories pooled; returns {stat, df}.
std::pair<double, int> chi2(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::map<int32_t, std::pair<int, int>> c;
  for (auto x : a) c[x].first++;
  for (auto x : b) c[x].second++;
  double stat = 0;
  int bins = 0, pa = 0, pb = 0;
  for (auto& [k, v] : c) {
    if (v.first + v.second < 10) {
      pa += v.first;
      pb += v.second;
      continue;
    }
    stat += std::pow(v.first - v.second, 2) / (v.first + v.second);
    ++bins;
  }
  if (pa + pb > 0) {
    stat += std::pow(pa - pb, 2) / (pa + pb);
    ++bins;
  }
  return {stat, std::max(1, bins - 1)};
}

// Upper quantile of chi-square(df) at 1e-4 (Wilson-Hilferty).
double chi2_crit(int df) {
  const double z = 3.719;
  const double k = df;
  return k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
}

// Returns the worst (stat / critical) ratio over the token positions; < 1 passes.
double worst_ratio(const std::vector<std::vector<int32_t>>& x, const std::vector<std::vector<int32_t>>& y,
                   std::string* detail) {
  double worst = 0;
  for (int k = 0; k < kTokens; ++k) {
    std::vector<int32_t> a, b;
    for (auto& r : x) a.push_back(r[k]);
    for (auto& r : y) b.push_back(r[k]);
    auto [s, df] = chi2(a, b);
    const double ratio = s / chi2_crit(df);
    *detail += " pos" + std::to_string(k) + ": chi2=" + std::to_string(s) + " df=" + std::to_string(df);
    worst = std::max(worst, ratio);
  }
  return worst;
}

std::vector<StrategyOptions> strategies() {
  std::vector<StrategyOptions> v;
  for (auto n : {"jacobi", "lade", "trie", "prompt-lookup", "suffix"}) {
    StrategyOptions o;
    o.name = n;
    if (o.name == "lade") {  // small pool so that candidates exist early
      o.lade.window = 5;
      o.lade.ngram = 3;
      o.lade.guesses = 5;
      o.lade.pool_from_prompt = true;
    }
    v.push_back(o);
  }
  return v;
}

std::vector<int32_t> repetitive_prompt() {
  auto tok = Tokenizer::load(stories(), 1);
  return tok->encode("the cat sat on the mat. the cat sat on the mat. the cat sat on the mat. the cat");
}

GenParams setting(int i) {
  GenParams gp;
  if (i == 0) {
    gp.sample.temperature = 1.0f;
  } else {
    gp.sample.temperature = 0.8f;
    gp.sample.top_k = 40;
    gp.sample.top_p = 0.9f;
  }
  return gp;
}

}  // namespace

TEST(Sampling, EveryStrategyMatchesPlainSamplingDistribution) {
  auto m = load_llama({stories(), "fp32", "cpu", 0, 0});
  const auto prompt = repetitive_prompt();
  for (int si = 0; si < 2; ++si) {
    const GenParams gp = setting(si);
    auto ar = make_ar_strategy();
    auto base = sample_runs(*m, *ar, prompt, gp, 0);
    for (const auto& o : strategies()) {
      auto s = make_strategy(o);
      auto got = sample_runs(*m, *s, prompt, gp, 100000);
      std::string detail;
      const double r = worst_ratio(base, got, &detail);
      EXPECT_LT(r, 1.0) << o.name << " setting " << si << detail;
      std::printf("  setting %d %-14s worst chi2/crit = %.3f\n", si, o.name.c_str(), r);
    }
  }
}

TEST(Sampling, BiasedVerifierFailsTheSameTest) {
  auto m = load_llama({stories(), "fp32", "cpu", 0, 0});
  const auto prompt = repetitive_prompt();
  const GenParams gp = setting(0);
  auto ar = make_ar_strategy();
  auto base = sample_runs(*m, *ar, prompt, gp, 0);
  // Wrong on purpose: accepts the first draft token at depth 1 whatever the model sampled.
  auto biased = [](const StepPlan& plan, const std::vector<int32_t>& results) {
    for (int i = 1; i < plan.size(); ++i)
      if (plan.draft[i] && plan.parents[i] == 0) return Verdict{{0, i}, {plan.tokens[i], results[i]}};
    return verify_plan(plan, results);
  };
  StrategyOptions o;
  o.name = "prompt-lookup";
  auto s = make_strategy(o);
  auto got = sample_runs(*m, *s, prompt, gp, 100000, biased);
  std::string detail;
  const double r = worst_ratio(base, got, &detail);
  EXPECT_GT(r, 1.0) << "the biased verifier was not detected:" << detail;
  std::printf("  biased verifier: worst chi2/crit = %.3f\n", r);
}

TEST(Sampling, SameSeedSameTokensAcrossStrategies) {
  // Position-keyed sampling: with the same seed every strategy reproduces plain sampling token for token.
  auto m = load_llama({stories(), "fp32", "cpu", 0, 0});
  auto ps = prompt_ids(10, m->config().vocab);
  GenParams gp = setting(1);
  gp.max_new_tokens = 48;
  gp.sample.seed = 1234;
  auto ar = make_ar_strategy();
  auto want = run_all(*m, *ar, ps, gp);
  for (const auto& o : strategies()) {
    auto s = make_strategy(o);
    EXPECT_EQ(run_all(*m, *s, ps, gp), want) << o.name;
    // Adaptive drafting, with budgets chosen by timing and at both extremes: the same tokens.
    for (auto shape : {CostShape::Calibrated, CostShape::Flat, CostShape::Steep, CostShape::Tiny}) {
      auto a = make_strategy(o);
      RequestStats st;
      EXPECT_EQ(run_all_adaptive(*m, *a, ps, gp, shape, &st), want) << o.name << " adaptive shape " << int(shape);
      if (shape == CostShape::Flat) { EXPECT_EQ(st.budgets.budget_hist[a->max_draft_budget()], st.steps) << o.name; }
      if (shape == CostShape::Steep) { EXPECT_EQ(st.budgets.plain_steps, st.steps) << o.name; }
    }
  }
}

TEST(Sampling, AdaptiveStrategiesMatchPlainSamplingDistribution) {
  // The distribution test with budgets chosen by the calibrated cost model (mixed sizes, plain steps included).
  auto m = load_llama({stories(), "fp32", "cpu", 0, 0});
  const auto prompt = repetitive_prompt();
  const GenParams gp = setting(0);
  auto ar = make_ar_strategy();
  auto base = sample_runs(*m, *ar, prompt, gp, 0);
  for (const auto& o : strategies()) {
    auto s = make_strategy(o);
    StepCostModel cost = cost_shape(*m, *s, CostShape::Calibrated);
    DraftController ctl(*s, cost);
    auto got = sample_runs(*m, *s, prompt, gp, 100000, {}, &ctl, &cost);
    std::string detail;
    const double r = worst_ratio(base, got, &detail);
    EXPECT_LT(r, 1.0) << o.name << " adaptive" << detail;
    std::printf("  adaptive %-14s worst chi2/crit = %.3f\n", o.name.c_str(), r);
  }
}
