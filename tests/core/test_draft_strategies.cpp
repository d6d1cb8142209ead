// Tests of the trie and prompt-lookup strategies: plan validity and bounds, and lossless decoding against a fake
// deterministic model (next token = table[previous token][token]) across many requests in one strategy object,
// through the real step runner (StepRunner, LocalExecutor) over an oracle model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "lookahead/decode/executor.h"
#include "lookahead/decode/step_runner.h"
#include "lookahead/decode/step_plan.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "common/oracle_model.h"
#include "common/expect_error.h"
#include "common/temp_dir.h"

namespace fs = std::filesystem;
using V = std::vector<int32_t>;

namespace {

struct FakeModel {
  int vocab;
  std::vector<int32_t> table;
  FakeModel(int v, uint32_t seed) : vocab(v), table(static_cast<size_t>(v) * v) {
    std::mt19937 rng(seed);
    for (auto& x : table) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(v));
  }
  int32_t next(int32_t prev, int32_t cur) const { return table[static_cast<size_t>(prev) * vocab + cur]; }
  int32_t next_of(const V& seq) const { return next(seq.size() >= 2 ? seq[seq.size() - 2] : 0, seq.back()); }
  V plain(V seq, int max_new) const {
    for (int i = 0; i < max_new; ++i) seq.push_back(next_of(seq));
    return seq;
  }
};

struct LoopStats {
  long steps = 0, tokens = 0, max_draft = 0;
};

// One request decoded through the strategy by the real step runner (LocalExecutor over an oracle model that
// answers with the fake model's table along each node's ancestor chain); every plan is checked. The context is
// prompt + max_new - 1 + `spare` positions: with spare = 0 the context ends at the request's last token; with more,
// only the new-token limit keeps plans from reaching past it (the step runner's max_depth).
V decode(la::Strategy& s, const FakeModel& m, const V& prompt, int max_new, int decoding_length, LoopStats& st,
         int spare = 0) {
  la::test::OracleModel om(m.vocab, static_cast<int>(prompt.size()) + max_new - 1 + spare, [&m](const V& c) {
    return m.next(c.size() >= 2 ? c[c.size() - 2] : 0, c.back());
  });
  la::LocalExecutor ex(om);
  la::StepRunner loop(ex, s, om.config());
  loop.begin(prompt, la::SampleParams{}, la::StepLimits{om.config().max_positions, max_new, false});
  while (!loop.done()) {
    const int gen = loop.generated();
    loop.step();
    const la::StepPlan& plan = loop.plan();
    const int max_depth = loop.max_depth();
    EXPECT_EQ(max_depth, max_new - gen - 1);
    EXPECT_NO_THROW(plan.validate());
    EXPECT_EQ(plan.tokens[0], loop.seq()[prompt.size() + gen - 1]);
    EXPECT_EQ(plan.num_lookahead(), 0);
    EXPECT_LE(plan.num_draft(), decoding_length);
    for (int d : plan.depths()) EXPECT_LE(d, max_depth);
    st.max_draft = std::max<long>(st.max_draft, plan.num_draft());
    EXPECT_LE(static_cast<int>(loop.verdict().tokens.size()), max_new - gen);
    ++st.steps;
    if (::testing::Test::HasFailure()) break;
  }
  st.tokens += loop.generated();
  loop.end();
  return loop.seq();
}

std::vector<V> make_prompts(int count, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  V shared(20);
  for (auto& x : shared) x = static_cast<int32_t>(rng() % vocab);
  std::vector<V> out;
  for (int i = 0; i < count; ++i) {
    V p;
    p.push_back(1);  // "BOS"
    if (i % 2) p.insert(p.end(), shared.begin(), shared.end());
    const int extra = static_cast<int>(rng() % 30);
    for (int j = 0; j < extra; ++j) p.push_back(static_cast<int32_t>(rng() % vocab));
    out.push_back(p);
  }
  out.push_back(V{1});  // BOS only
  return out;
}


}  // namespace

TEST(DraftTrieStrategy, LosslessAcrossRequestsAndConfigs) {
  const FakeModel m(13, 17);
  const auto prompts = make_prompts(24, 13, 5);
  for (const char* mode : {"hierarchical", "parallel"}) {
    for (int dl : {0, 1, 8, 64}) {
      for (int bl : {1, 2, 6, 12}) {
        for (int cap : {0, 40}) {
          la::StrategyOptions opt;
          opt.name = "trie";
          opt.trie.mode = mode;
          opt.trie.decoding_length = dl;
          opt.trie.branch_length = bl;
          opt.trie.capacity = cap;
          auto s = la::make_trie_strategy(opt);
          EXPECT_EQ(s->name(), "trie");
          LoopStats st;
          for (size_t r = 0; r < prompts.size(); ++r) {
            const int max_new = 1 + static_cast<int>((r * 7) % 60);
            const V got = decode(*s, m, prompts[r], max_new, dl, st);
            ASSERT_EQ(got, m.plain(prompts[r], max_new))
                << mode << " dl=" << dl << " bl=" << bl << " cap=" << cap << " request " << r;
          }
          const auto c = s->counters();
          ASSERT_TRUE(c.count("trie_nodes"));
          EXPECT_LE(c.at("trie_nodes"), c.at("trie_capacity"));
          EXPECT_DOUBLE_EQ(c.at("trie_capacity"), cap > 0 ? cap : 32.0 * dl);
          if (std::getenv("LA_TEST_VERBOSE")) {
            std::printf("trie %s dl=%d bl=%d cap=%d: %ld steps for %ld tokens\n", mode, dl, bl, cap, st.steps, st.tokens);
          }
          if (dl > 0 && bl > 1) { EXPECT_LT(st.steps, st.tokens) << "drafts never accepted"; }
          if (dl == 0 || bl == 1) {
            EXPECT_EQ(st.steps, st.tokens) << "no drafts possible";
            EXPECT_EQ(st.max_draft, 0);
          }
          if (dl >= 8 && bl >= 6 && cap == 0) {
            // The fake model's output is periodic: a warm trie must accept a lot.
            EXPECT_LT(static_cast<double>(st.steps), 0.6 * static_cast<double>(st.tokens))
                << mode << " dl=" << dl << " bl=" << bl << ": " << st.steps << " steps for " << st.tokens;
          }
        }
      }
    }
  }
}

TEST(DraftTrieStrategy, PlansRespectBudgetAndDepth) {
  const FakeModel m(7, 3);
  la::StrategyOptions opt;
  opt.trie.decoding_length = 10;
  opt.trie.branch_length = 8;
  auto s = la::make_trie_strategy(opt);
  LoopStats st;
  decode(*s, m, V{1, 2, 3}, 200, 10, st);  // warm it up
  EXPECT_EQ(st.max_draft, 10);
  V seq = m.plain(V{1, 2, 3}, 50);
  for (int md : {0, 1, 2, 3, 100}) {
    la::StepPlan plan;
    s->plan(seq, md, plan);
    plan.validate();
    EXPECT_LE(plan.num_draft(), 10);
    int maxd = 0;
    for (int d : plan.depths()) maxd = std::max(maxd, d);
    EXPECT_LE(maxd, std::min(md, 7));
    if (md > 0) { EXPECT_GT(plan.num_draft(), 0); }
    if (md == 0) { EXPECT_EQ(plan.size(), 1); }
    // The first draft continues the periodic output correctly.
    if (md > 0) { EXPECT_EQ(plan.tokens[1], m.next_of(seq)); }
  }
  opt.trie.mode = "sideways";
  EXPECT_THROW(la::make_trie_strategy(opt), la::Error);
}

TEST(DraftTrieStrategy, StateFileMissingCorruptAndRoundTrip) {
  la::test::TempDir td("la_strat");
  const FakeModel m(11, 9);
  const auto prompts = make_prompts(8, 11, 2);
  la::StrategyOptions opt;
  opt.trie.decoding_length = 16;
  opt.trie.branch_length = 6;
  opt.trie.state = td.path("state.trie");
  auto a = la::make_trie_strategy(opt);  // missing file: cold start
  EXPECT_DOUBLE_EQ(a->counters().at("trie_loaded_nodes"), 0);
  LoopStats st;
  for (const auto& p : prompts) decode(*a, m, p, 40, 16, st);
  a->checkpoint();
  ASSERT_TRUE(fs::exists(opt.trie.state));
  EXPECT_EQ(std::distance(fs::directory_iterator(td.dir), fs::directory_iterator()), 1);
  auto b = la::make_trie_strategy(opt);
  EXPECT_GT(b->counters().at("trie_loaded_nodes"), 0);
  EXPECT_DOUBLE_EQ(b->counters().at("trie_nodes"), a->counters().at("trie_nodes"));
  for (const auto& p : prompts) {
    const V seq = m.plain(p, 20);
    la::StepPlan pa, pb;
    a->plan(seq, 100, pa);
    b->plan(seq, 100, pb);
    EXPECT_EQ(pa.tokens, pb.tokens);
    EXPECT_EQ(pa.parents, pb.parents);
  }
  // The warm reloaded strategy is still lossless.
  LoopStats st2;
  for (const auto& p : prompts) EXPECT_EQ(decode(*b, m, p, 30, 16, st2), m.plain(p, 30));
  EXPECT_LT(st2.steps, st2.tokens);
  // A corrupt state file is refused with an error naming it.
  {
    std::ofstream out(opt.trie.state, std::ios::binary | std::ios::trunc);
    out << "LATRIE\r\ngarbage";
  }
  try {
    la::make_trie_strategy(opt);
    ADD_FAILURE() << "corrupt state file accepted";
  } catch (const la::Error& e) {
    EXPECT_NE(std::string(e.what()).find(opt.trie.state), std::string::npos) << e.what();
  }
}

// checkpoint() after every request, as the CLI's request loop calls it: after request i the file holds exactly
// what a fresh strategy that ran requests 0..i and saved once writes (a job killed during request i+1 keeps
// 0..i); a checkpoint with nothing new writes nothing, nor does one before any request or after a load.
TEST(DraftStateCheckpoint, EachRequestSavesTheStateSoFarOnlyWhenChanged) {
  for (const std::string name : {"trie", "suffix"}) {
    la::test::TempDir td("la_strat");
    const FakeModel m(11, 9);
    const auto prompts = make_prompts(6, 11, 3);
    la::StrategyOptions opt;
    opt.name = name;
    opt.trie.decoding_length = 16;
    opt.trie.branch_length = 6;
    opt.suffix.vocab_size = 11;
    opt.suffix.model_id = 77;
    auto state_at = [&](const std::string& path) {
      opt.trie.state = opt.suffix.state = path;
      return la::make_strategy(opt);
    };
    const std::string path = td.path("state"), writes = name + "_state_writes";
    const int budget = name == "trie" ? opt.trie.decoding_length : opt.suffix.max_tokens;
    auto a = state_at(path);
    a->checkpoint();
    EXPECT_FALSE(fs::exists(path)) << name << ": written before any request";
    LoopStats st;
    for (size_t i = 0; i < prompts.size(); ++i) {
      decode(*a, m, prompts[i], 30, budget, st);
      a->checkpoint();
      ASSERT_TRUE(fs::exists(path)) << name;
      const std::string after = la::read_file(path);
      a->checkpoint();
      EXPECT_DOUBLE_EQ(a->counters().at(writes), static_cast<double>(i + 1)) << name << ": unchanged state rewritten";
      auto b = state_at(td.path("ref" + std::to_string(i)));
      for (size_t j = 0; j <= i; ++j) decode(*b, m, prompts[j], 30, budget, st);
      b->checkpoint();
      EXPECT_EQ(la::read_file(td.path("ref" + std::to_string(i))), after) << name << " after request " << i;
    }
    auto c = state_at(path);  // loads the file; nothing new to write
    c->checkpoint();
    EXPECT_DOUBLE_EQ(c->counters().at(writes), 0) << name;
  }
}

TEST(DraftPromptLookupStrategy, PlansTheFollowingChain) {
  la::StrategyOptions opt;
  opt.pl.min_ngram = 1;
  opt.pl.max_ngram = 4;
  opt.pl.num_tokens = 10;
  auto s = la::make_prompt_lookup_strategy(opt);
  EXPECT_EQ(s->name(), "prompt-lookup");
  const V prompt = {1, 2, 3, 4, 1, 2};
  s->begin_request(prompt);
  la::StepPlan plan;
  s->plan(prompt, 100, plan);
  plan.validate();
  EXPECT_EQ(plan.tokens, (V{2, 3, 4, 1, 2}));
  EXPECT_EQ(plan.parents, (V{-1, 0, 1, 2, 3}));
  s->plan(prompt, 2, plan);
  EXPECT_EQ(plan.tokens, (V{2, 3, 4}));
  s->plan(prompt, 0, plan);
  EXPECT_EQ(plan.tokens, (V{2}));
  s->plan(V{1, 2, 3, 4, 1, 2, 9}, 100, plan);
  EXPECT_EQ(plan.tokens, (V{9}));
  opt.pl.num_tokens = 2;
  auto t = la::make_prompt_lookup_strategy(opt);
  t->begin_request(prompt);
  t->plan(prompt, 100, plan);
  EXPECT_EQ(plan.tokens, (V{2, 3, 4}));
  opt.pl.min_ngram = 0;
  EXPECT_THROW(la::make_prompt_lookup_strategy(opt), la::Error);
}

TEST(DraftPromptLookupStrategy, LosslessAcrossRequests) {
  const FakeModel m(13, 21);
  const auto prompts = make_prompts(20, 13, 8);
  for (int k : {0, 1, 5, 10}) {
    for (int maxn : {1, 3, 4}) {
      la::StrategyOptions opt;
      opt.pl.min_ngram = 1;
      opt.pl.max_ngram = maxn;
      opt.pl.num_tokens = k;
      auto s = la::make_prompt_lookup_strategy(opt);
      LoopStats st;
      for (size_t r = 0; r < prompts.size(); ++r) {
        const int max_new = 1 + static_cast<int>((r * 11) % 70);
        ASSERT_EQ(decode(*s, m, prompts[r], max_new, k, st), m.plain(prompts[r], max_new))
            << "k=" << k << " max_n=" << maxn << " request " << r;
      }
      if (std::getenv("LA_TEST_VERBOSE")) {
        std::printf("prompt-lookup k=%d max_n=%d: %ld steps for %ld tokens\n", k, maxn, st.steps, st.tokens);
      }
      if (k == 0) { EXPECT_EQ(st.steps, st.tokens); }
      if (k >= 5 && maxn >= 3) {
        EXPECT_LT(static_cast<double>(st.steps), 0.7 * static_cast<double>(st.tokens))
            << "k=" << k << " max_n=" << maxn << ": " << st.steps << " steps for " << st.tokens;
      }
      EXPECT_GE(s->counters().at("pl_steps"), static_cast<double>(st.steps));
    }
  }
}

// The step runner plans no deeper than the tokens a request may still make, however much context is left: a
// draft row deeper than that would be verified and its token cut at the length limit (and booked as a gain by the
// adaptive controller's ledger). decode() checks every plan's depth against max_new - generated - 1.
TEST(DraftPromptLookupStrategy, DraftsNoDeeperThanTheTokensLeft) {
  const FakeModel m(13, 21);
  const auto prompts = make_prompts(20, 13, 8);
  la::StrategyOptions opt;
  opt.pl.num_tokens = 10;
  auto s = la::make_prompt_lookup_strategy(opt);
  LoopStats st;
  for (size_t r = 0; r < prompts.size(); ++r) {
    const int max_new = 1 + static_cast<int>((r * 5) % 12);
    ASSERT_EQ(decode(*s, m, prompts[r], max_new, 10, st, 64), m.plain(prompts[r], max_new)) << "request " << r;
  }
  EXPECT_GE(st.max_draft, 5);  // it drafted long chains where tokens were left
}

// ---- suffix strategy ----

TEST(DraftSuffixStrategy, LosslessAcrossRequestsAndConfigs) {
  const FakeModel m(13, 17);
  const auto prompts = make_prompts(24, 13, 5);
  struct Cfg {
    int max_tokens, depth;
    double factor, min_prob;
    int64_t global_mb;
  };
  for (const Cfg c : {Cfg{32, 32, 2.0, 0.1, 64}, Cfg{1, 2, 1.0, 0.0, 64}, Cfg{64, 64, 8.0, 0.0, 0},
                      Cfg{8, 6, 0.5, 0.5, 1}, Cfg{0, 32, 2.0, 0.1, 64}}) {
    la::StrategyOptions opt;
    opt.name = "suffix";
    opt.suffix.max_tokens = c.max_tokens;
    opt.suffix.depth = c.depth;
    opt.suffix.factor = c.factor;
    opt.suffix.min_prob = c.min_prob;
    opt.suffix.global_mb = c.global_mb;
    auto s = la::make_strategy(opt);
    LoopStats st;
    for (const auto& p : prompts) {
      EXPECT_EQ(decode(*s, m, p, 60, c.max_tokens, st), m.plain(p, 60)) << c.max_tokens << "/" << c.depth;
      if (::testing::Test::HasFailure()) return;
    }
    if (c.max_tokens >= 8) {
      EXPECT_LT(st.steps, st.tokens * 3 / 4) << "the fake model's cycles must be drafted";
    }
    if (c.max_tokens == 0) {
      EXPECT_EQ(st.steps, st.tokens);
    }
    if (c.global_mb > 0) {
      EXPECT_GT(s->counters().at("suffix_global_sequences"), 0);
    }
  }
}

// The budget contract (strategy.h): a plan at budget b is the first b draft nodes of the plan at any larger
// budget from the same state.
TEST(DraftSuffixStrategy, SmallerBudgetKeepsAPrefix) {
  const FakeModel m(11, 4);
  const auto prompts = make_prompts(6, 11, 8);
  la::StrategyOptions opt;
  opt.name = "suffix";
  opt.suffix.min_prob = 0.0;
  auto s = la::make_strategy(opt);
  LoopStats st;
  for (const auto& p : prompts) decode(*s, m, p, 40, 32, st);  // fill the global tree
  int drafted = 0;
  for (const auto& p : prompts) {
    const V seq = m.plain(p, 25);
    s->begin_request(p);
    la::StepPlan full, part;
    s->set_draft_budget(-1);
    s->plan(seq, 100, full);
    drafted += full.num_draft() > 0;
    for (int b : {0, 1, 2, 4, 8, 16}) {
      s->set_draft_budget(b);
      s->plan(seq, 100, part);
      ASSERT_EQ(part.num_draft(), std::min(b, full.num_draft()));
      for (int i = 0; i < part.size(); ++i) {
        EXPECT_EQ(part.tokens[i], full.tokens[i]);
        EXPECT_EQ(part.parents[i], full.parents[i]);
      }
    }
    s->set_draft_budget(-1);
    s->end_request(seq);
  }
  EXPECT_GT(drafted, 0);
}

// A request that never drafts (the controller asleep: begin_request, end_request, no plan) costs no tree work:
// its prompt is never indexed and its output is stored for the global tree, inserted at the next draft, which
// then proposes what that output taught.
TEST(DraftSuffixStrategy, ARequestThatNeverDraftsCostsNoTreeWork) {
  const FakeModel m(11, 4);
  const auto prompts = make_prompts(2, 11, 8);
  la::StrategyOptions opt;
  opt.name = "suffix";
  opt.suffix.min_prob = 0.0;
  auto s = la::make_strategy(opt);
  const V out = m.plain(prompts[0], 30);
  s->begin_request(prompts[0]);
  s->end_request(out);
  auto c = s->counters();
  EXPECT_EQ(c.at("suffix_global_nodes"), 0) << "the output was inserted while no draft was asked for";
  EXPECT_EQ(c.at("suffix_global_pending"), 1);
  EXPECT_EQ(c.at("suffix_global_sequences"), 1);
  // The same context again, in a new request that drafts: the stored output answers.
  s->begin_request(prompts[1]);
  EXPECT_EQ(s->counters().at("suffix_local_nodes"), 0) << "the prompt was indexed before any draft";
  const V ctx(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(out.size()) - 10);
  la::StepPlan plan;
  s->plan(ctx, 100, plan);
  c = s->counters();
  EXPECT_EQ(c.at("suffix_global_pending"), 0);
  EXPECT_GT(c.at("suffix_global_nodes"), 0);
  ASSERT_GT(plan.num_draft(), 0);
  EXPECT_EQ(plan.tokens[1], out[ctx.size()]) << "the draft does not follow the learned output";
  s->end_request(ctx);
}

TEST(DraftSuffixStrategy, StateFileMissingCorruptAndRoundTrip) {
  la::test::TempDir td("la_strat");
  const FakeModel m(11, 9);
  const auto prompts = make_prompts(8, 11, 2);
  la::StrategyOptions opt;
  opt.name = "suffix";
  opt.suffix.state = td.path("state.suffix");
  opt.suffix.vocab_size = 11;
  opt.suffix.model_id = 77;
  auto a = la::make_strategy(opt);  // missing file: cold start
  EXPECT_DOUBLE_EQ(a->counters().at("suffix_loaded_sequences"), 0);
  LoopStats st;
  for (const auto& p : prompts) decode(*a, m, p, 40, 32, st);
  a->checkpoint();
  ASSERT_TRUE(fs::exists(opt.suffix.state));
  EXPECT_EQ(std::distance(fs::directory_iterator(td.dir), fs::directory_iterator()), 1);
  auto b = la::make_strategy(opt);
  EXPECT_DOUBLE_EQ(b->counters().at("suffix_loaded_sequences"), static_cast<double>(prompts.size()));
  EXPECT_DOUBLE_EQ(b->counters().at("suffix_global_sequences"), a->counters().at("suffix_global_sequences"));
  EXPECT_DOUBLE_EQ(b->counters().at("suffix_global_pending"), static_cast<double>(prompts.size()))
      << "loading inserts lazily, at the first draft";
  // Warm and reloaded: still lossless, and it drafts from the first step of a repeated prompt.
  LoopStats st2;
  for (const auto& p : prompts) EXPECT_EQ(decode(*b, m, p, 30, 32, st2), m.plain(p, 30));
  EXPECT_GT(b->counters().at("suffix_global_steps"), 0);
  // Another model (identity) or vocabulary size: refused, naming the file.
  for (auto set : std::vector<std::function<void(la::StrategyOptions&)>>{
           [](auto& o) { o.suffix.model_id = 78; }, [](auto& o) { o.suffix.vocab_size = 12; }}) {
    la::StrategyOptions o = opt;
    set(o);
    const std::string e = la::test::error_of([&] { la::make_strategy(o); });
    EXPECT_NE(e.find(opt.suffix.state), std::string::npos) << e;
  }
  // Corrupt: refused with one error naming the file.
  {
    std::ofstream out(opt.suffix.state, std::ios::binary | std::ios::trunc);
    out << "LASUFX\r\ngarbage";
  }
  const std::string e = la::test::error_of([&] { la::make_strategy(opt); });
  EXPECT_NE(e.find(opt.suffix.state), std::string::npos) << e;
}
