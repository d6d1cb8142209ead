// Ouroboros: greedy outputs equal plain decoding of the target (fp32, CPU) for many prompts and parameter
// settings, with the shared pair (stories260K target, llama2xs draft) and a random pair; one strategy object over
// all prompts (warm phrase pool); near the draft's and the target's context limits; pool state persistence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <ostream>

#include "common.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

using namespace la;
using namespace la::test;

namespace {

// One intra-op thread: the models are tiny, and OpenMP barriers spin badly on a loaded 2-core machine.
constexpr int kThreads = 1;

struct Setting {
  std::string label;
  StrategyOptions opt;
};

std::vector<Setting> settings() {
  std::vector<Setting> v;
  auto add = [&](std::string label, auto f) {
    StrategyOptions o;
    o.name = "ouroboros";
    o.ouroboros.draft_model = "draft";
    f(o);
    v.push_back({std::move(label), o});
  };
  add("default", [](auto&) {});
  add("gamma1", [](auto& o) { o.ouroboros.gamma = 1; });
  add("gamma4_ext0", [](auto& o) { o.ouroboros.gamma = 4; o.ouroboros.extensions = 0; });
  add("W5_N3_G5_ext5", [](auto& o) { o.ouroboros.lade.window = 5; o.ouroboros.lade.ngram = 3; o.ouroboros.lade.guesses = 5; o.ouroboros.extensions = 5; });
  return v;
}

struct Pair {
  std::string label, target, draft;
  int prompts;
};

void PrintTo(const Pair& p, std::ostream* os) { *os << p.label; }

class Ouroboros : public ::testing::TestWithParam<Pair> {};

TEST_P(Ouroboros, EqualsPlainGreedy) {
  const auto pc = GetParam();
  auto m = load_llama({pc.target, "fp32", "cpu", 0, kThreads});
  auto d = load_llama({pc.draft, "fp32", "cpu", 0, kThreads});
  ASSERT_EQ(m->config().vocab, d->config().vocab);
  auto ps = prompt_ids(pc.prompts, m->config().vocab);
  GenParams gp;
  gp.max_new_tokens = 72;
  auto ar = make_ar_strategy();
  auto want = run_all(*m, *ar, ps, gp);
  for (const auto& c : settings()) {
    auto s = make_strategy(c.opt, d.get());
    RequestStats st;
    auto got = run_all(*m, *s, ps, gp, &st);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << pc.label << " / " << c.label << " prompt " << i;
    EXPECT_LE(st.steps, st.new_tokens) << c.label;
    auto k = s->counters();
    EXPECT_GT(k["draft_forwards"], 0) << c.label;
    EXPECT_LE(k["draft_accepted"], k["draft_proposed"]) << c.label;
    if (c.opt.ouroboros.extensions == 0) {
      EXPECT_EQ(k["extension_tokens"], 0) << c.label;
    }
    std::printf("  %-8s %-14s S=%.2f steps=%d tokens=%d draft/fwd=%.2f acceptance=%.3f ext_acc=%g/%g pool=%g\n",
                pc.label.c_str(), c.label.c_str(), st.compression(), st.steps, st.new_tokens,
                k["draft_tokens_per_forward"], k["draft_acceptance"], k["extension_accepted"], k["extension_tokens"],
                k["pool_phrases"]);
    // The shared pair drafts well: the draft must be worth something.
    if (pc.label == "shared" && c.opt.ouroboros.gamma > 1) {
      EXPECT_GT(st.compression(), 1.3) << c.label;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, Ouroboros,
                         ::testing::Values(Pair{"shared", stories(), llama2xs(), 16},
                                           // Random weights: the draft is (nearly) always rejected, so every step
                                           // pays gamma draft forwards; 12 prompts reach every rejection path.
                                           Pair{"random", "random:stories260k:1", "random:llama2xs:2", 12}),
                         [](const auto& info) { return info.param.label; });

// Long prompts: the draft (256 positions) runs out of context mid-request or cannot take the prompt at all, while
// the target (512 positions) decodes to its own limit (max_new_tokens 0). A self-draft pair (llama2xs drafting
// for itself) accepts everything, so its plans are cut by the target's max_depth at the very end.
TEST(OuroborosContext, NearContextLimits) {
  auto tok = Tokenizer::load(stories(), 1);
  auto texts = prompt_texts(30);
  auto long_prompt = [&](size_t min_tokens) {
    std::string t;
    std::vector<int32_t> ids;
    for (size_t i = 0; ids.size() < min_tokens; ++i) {
      t += texts[i % texts.size()] + " ";
      ids = tok->encode(t);
    }
    return ids;
  };
  GenParams gp;
  gp.max_new_tokens = 0;
  {
    auto m = load_llama({stories(), "fp32", "cpu", 0, kThreads});
    auto d = load_llama({llama2xs(), "fp32", "cpu", 0, kThreads});
    std::vector<std::vector<int32_t>> ps = {long_prompt(200), long_prompt(250), long_prompt(300),
                                            prompt_ids(1, 512)[0]};
    auto ar = make_ar_strategy();
    auto want = run_all(*m, *ar, ps, gp);
    for (auto& w : want) ASSERT_FALSE(w.empty());
    StrategyOptions o;
    o.name = "ouroboros";
    o.ouroboros.draft_model = "draft";
    auto s = make_strategy(o, d.get());
    RequestStats st;
    EXPECT_EQ(run_all(*m, *s, ps, gp, &st), want);
    EXPECT_LE(d->cache_len(), d->config().max_positions);
    std::printf("  long prompts: S=%.2f tokens=%d\n", st.compression(), st.new_tokens);
  }
  {
    auto m = load_llama({llama2xs(), "fp32", "cpu", 0, kThreads});
    auto d = load_llama({llama2xs(), "fp32", "cpu", 0, kThreads});
    auto ps = prompt_ids(3, 512);
    ps.push_back(long_prompt(230));
    auto ar = make_ar_strategy();
    auto want = run_all(*m, *ar, ps, gp);
    StrategyOptions o;
    o.name = "ouroboros";
    o.ouroboros.draft_model = "draft";
    auto s = make_strategy(o, d.get());
    RequestStats st;
    EXPECT_EQ(run_all(*m, *s, ps, gp, &st), want);
    auto k = s->counters();
    EXPECT_GT(k["draft_acceptance"], 0.95);  // same model: (nearly) every drafted token is the target's
    std::printf("  self-draft: S=%.2f tokens=%d\n", st.compression(), st.new_tokens);
  }
}

// Sampling: the draft is deterministic (greedy draft model), so with position-keyed sampling the verifier is exact
// and the output equals plain sampled decoding token for token.
TEST(OuroborosSampling, EqualsPlainSampling) {
  auto m = load_llama({stories(), "fp32", "cpu", 0, kThreads});
  auto d = load_llama({llama2xs(), "fp32", "cpu", 0, kThreads});
  auto ps = prompt_ids(8, 512);
  GenParams gp;
  gp.max_new_tokens = 48;
  gp.sample.temperature = 0.8f;
  gp.sample.top_p = 0.95f;
  gp.sample.seed = 7;
  auto ar = make_ar_strategy();
  auto want = run_all(*m, *ar, ps, gp);
  StrategyOptions o;
  o.name = "ouroboros";
  o.ouroboros.draft_model = "draft";
  o.ouroboros.gamma = 4;
  auto s = make_strategy(o, d.get());
  RequestStats st;
  EXPECT_EQ(run_all(*m, *s, ps, gp, &st), want);
  std::printf("  sampling T=0.8: S=%.2f acceptance=%.3f\n", st.compression(), s->counters()["draft_acceptance"]);
}

// Adaptive drafting: calibrated cost (budgets by timing, the draft model's time counted), flat (the largest budget
// every step: gamma and every extension) and steep (plain steps, the draft model never runs). Greedy and sampled
// outputs equal plain decoding in all three.
TEST(OuroborosAdaptive, EqualsPlainInEveryCostShape) {
  auto m = load_llama({stories(), "fp32", "cpu", 0, kThreads});
  auto d = load_llama({llama2xs(), "fp32", "cpu", 0, kThreads});
  auto ps = prompt_ids(6, 512);
  for (int sampled = 0; sampled < 2; ++sampled) {
    GenParams gp;
    gp.max_new_tokens = 40;
    if (sampled) {
      gp.sample.temperature = 0.8f;
      gp.sample.top_p = 0.95f;
      gp.sample.seed = 11;
    }
    auto ar = make_ar_strategy();
    auto want = run_all(*m, *ar, ps, gp);
    for (auto shape : {CostShape::Calibrated, CostShape::Flat, CostShape::Steep, CostShape::Tiny}) {
      StrategyOptions o;
      o.name = "ouroboros";
      o.ouroboros.draft_model = "draft";
      o.ouroboros.gamma = 6;
      auto s = make_strategy(o, d.get());
      RequestStats st;
      EXPECT_EQ(run_all_adaptive(*m, *s, ps, gp, shape, &st), want) << "sampled " << sampled << " shape " << int(shape);
      if (shape == CostShape::Flat) { EXPECT_EQ(st.budgets.budget_hist[s->max_draft_budget()], st.steps); }
      if (shape == CostShape::Steep) {
        EXPECT_EQ(st.budgets.plain_steps, st.steps);
        EXPECT_EQ(s->counters()["draft_forwards"], 0);
      }
      std::printf("  sampled %d shape %d S=%.2f plain=%lld/%lld draft forwards=%g\n", sampled, int(shape),
                  st.compression(), (long long)st.budgets.plain_steps, (long long)st.budgets.steps,
                  s->counters()["draft_forwards"]);
    }
  }
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("la_ouro_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(OuroborosPool, StateRoundTripAndCorruptRefusal) {
  auto m = load_llama({stories(), "fp32", "cpu", 0, kThreads});
  auto d = load_llama({llama2xs(), "fp32", "cpu", 0, kThreads});
  auto ps = prompt_ids(4, 512);
  GenParams gp;
  gp.max_new_tokens = 72;
  auto ar = make_ar_strategy();
  auto want = run_all(*m, *ar, ps, gp);
  const std::string path = temp_path("pool.bin");
  std::remove(path.c_str());
  StrategyOptions o;
  o.name = "ouroboros";
  o.ouroboros.draft_model = "draft";
  o.ouroboros.pool_state = path;
  double phrases = 0;
  {
    auto s = make_strategy(o, d.get());  // no file yet: starts empty
    EXPECT_EQ(s->counters()["pool_phrases"], 0);
    EXPECT_EQ(run_all(*m, *s, ps, gp), want);
    phrases = s->counters()["pool_phrases"];
    EXPECT_GT(phrases, 0);
    s->checkpoint();
  }
  ASSERT_TRUE(file_exists(path));
  const std::string saved = read_file(path);
  {
    auto s = make_strategy(o, d.get());  // loads the saved pool
    EXPECT_EQ(s->counters()["pool_phrases"], phrases);
    s->checkpoint();  // an unchanged pool: nothing written, the file keeps its bytes
    EXPECT_EQ(read_file(path), saved);
    EXPECT_EQ(run_all(*m, *s, ps, gp), want);  // warm from the file: still exact
  }
  // A corrupt file is refused with the pool's error.
  std::string bad = saved;
  bad[bad.size() / 2] ^= 0x5a;
  write_file_atomic(path, bad);
  try {
    make_strategy(o, d.get());
    FAIL() << "corrupt pool state accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  write_file_atomic(path, "garbage");
  EXPECT_THROW(make_strategy(o, d.get()), Error);
  std::remove(path.c_str());
  // No draft model.
  try {
    make_ouroboros_strategy(o, nullptr);
    FAIL() << "no draft accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a draft model"), std::string::npos) << e.what();
  }
}

}  // namespace
