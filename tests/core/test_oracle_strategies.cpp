// Every strategy through the real Generator (StepRunner, LocalExecutor) over oracle models (oracle_model.h) whose
// continuation is known, so the tokens accepted at every step are known too: a strategy that never drafts, or
// drafts from the wrong place (a wrong position, parent or pool key), accepts fewer and fails. Each expectation
// is derived in its comment; the ids always equal plain decoding's.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lookahead/decode/executor.h"
#include "lookahead/decode/generator.h"
#include "lookahead/decode/strategies.h"
#include "common/oracle_model.h"

using V = std::vector<int32_t>;
using la::test::OracleModel;

namespace {

struct Outcome {
  V ids;
  std::vector<int> kept;  // tokens appended by each step
};

Outcome generate(la::Strategy& s, OracleModel& m, const V& prompt, int max_new) {
  la::LocalExecutor ex(m);
  la::Generator g(ex, s, m.config());
  la::GenParams gp;
  gp.max_new_tokens = max_new;
  Outcome r;
  size_t seen = 0;
  auto res = g.generate(prompt, gp, [&](const V& ids) {
    r.kept.push_back(static_cast<int>(ids.size() - seen));
    seen = ids.size();
  });
  r.ids = res.ids;
  EXPECT_EQ(res.stats.steps, static_cast<int>(r.kept.size()));
  return r;
}

V plain(OracleModel& m, const V& prompt, int max_new) {
  auto ar = la::make_ar_strategy();
  return generate(*ar, m, prompt, max_new).ids;
}


// The cycle: 3 repeats, so the token after 3 depends on the one before it (11 3 -> 4, 4 3 -> 5).
const V kCycle = {3, 4, 3, 5, 6, 7, 8, 9, 10, 11};
constexpr int kVocab = 16;

V cycle_prompt(int periods) {
  V p = {1};
  for (int i = 0; i < periods; ++i) p.insert(p.end(), kCycle.begin(), kCycle.end());
  return p;
}

// generate(), and its ids must equal plain decoding's.
Outcome generate_as_plain(la::Strategy& s, OracleModel& m, const V& prompt, int max_new) {
  Outcome r = generate(s, m, prompt, max_new);
  EXPECT_EQ(r.ids, plain(m, prompt, max_new)) << s.name();
  return r;
}

// Runs the strategy on the cycle oracle for 40 new tokens after two periods of the cycle; the ids must equal plain
// decoding's. Returns the tokens each step kept.
std::vector<int> kept_on_cycle(const la::StrategyOptions& o) {
  OracleModel m(kVocab, 256, la::test::cycle_rule(kCycle));
  auto s = la::make_strategy(o);
  return generate_as_plain(*s, m, cycle_prompt(2), 40).kept;
}

// LADE with W = 5, N = 4, G = 3.
la::StrategyOptions lade_options(bool pool_from_prompt) {
  la::StrategyOptions o;
  o.name = "lade";
  o.lade.window = 5;
  o.lade.ngram = 4;
  o.lade.guesses = 3;
  o.lade.pool_from_prompt = pool_from_prompt;
  return o;
}

// Ouroboros drafting with the oracle draft model: gamma 4, `extensions` pool extensions, its pool's LADE at
// W = 3, N = 3, G = 2.
la::StrategyOptions ouroboros_options(int extensions) {
  la::StrategyOptions o;
  o.name = "ouroboros";
  o.ouroboros.draft_model = "oracle";
  o.ouroboros.gamma = 4;
  o.ouroboros.extensions = extensions;
  o.ouroboros.lade.window = 3;
  o.ouroboros.lade.ngram = 3;
  o.ouroboros.lade.guesses = 2;
  return o;
}

// Another group's finished request (Strategy::learn's input): one period of the cycle and the 40 tokens plain
// decoding appends to it.
struct Finished {
  V tokens;
  size_t prompt_len = 0;
};
Finished another_request(OracleModel& m) {
  Finished f;
  f.tokens = cycle_prompt(1);
  f.prompt_len = f.tokens.size();
  const V out = plain(m, f.tokens, 40);
  f.tokens.insert(f.tokens.end(), out.begin(), out.end());
  return f;
}

}  // namespace

// Prompt lookup (1..4-gram, 10 tokens): the prompt holds the cycle twice, so the last 4 tokens (8 9 10 11) occur
// in the first period followed by 10 correct tokens: 10 drafts + the model's token = 11 per step; the last step
// verifies 11 but only 7 fit in 40.
TEST(OracleStrategies, PromptLookupAcceptsTheFollowingTokens) {
  la::StrategyOptions o;
  o.name = "prompt-lookup";
  EXPECT_EQ(kept_on_cycle(o), (std::vector<int>{11, 11, 11, 7}));
}

// Trie (branch length 12): the prompt's windows of 12 tokens are its branches. The first step's root (11) ends
// the prompt, so its longest branch is prompt[10, 21): 10 drafts + 1. From then on the generated windows hold
// 11 tokens after an 11: 11 drafts + 1 = 12 per step; 40 = 11 + 12 + 12 + 5.
TEST(OracleStrategies, TrieAcceptsWholeBranches) {
  la::StrategyOptions o;
  o.name = "trie";
  EXPECT_EQ(kept_on_cycle(o), (std::vector<int>{11, 12, 12, 5}));
}

// LADE with the pool filled from the prompt (N = 4, G = 3): every 4-gram of the cycle is in the pool, the key 3
// holds both of its continuations (4 3 5 and 5 6 7; G = 3 keeps both), so the verification branch always holds
// the right n-gram: N-1 drafts + 1 = 4 tokens per step.
TEST(OracleStrategies, LadePoolFromPromptAcceptsWholeNgrams) {
  EXPECT_EQ(kept_on_cycle(lade_options(true)), std::vector<int>(10, 4));
}

// LADE from an empty pool (W = 5, N = 4, G = 3, seed 0): steps 1-2 fill the window's levels (N-2 warm-up steps)
// and step 3's update harvests its first 5 n-grams, so steps 1-3 can only yield 1 token. Then the pool holds
// n-grams keyed by the window's level-0 tokens: step 4's root has one (4 tokens), steps 5-7 do not; from step 8
// the harvest covers the cycle and every step yields N = 4 (the last step is cut at 40).
TEST(OracleStrategies, LadeWindowFillsThePool) {
  EXPECT_EQ(kept_on_cycle(lade_options(false)), (std::vector<int>{1, 1, 1, 4, 1, 1, 1, 4, 4, 4, 4, 4, 4, 4, 2}));
}

// Jacobi (block 4) on a model that knows its script by position, the script's continuation holding no prompt
// token: the first guesses (prompt tokens) are all wrong (1 token), but every node computed the script's token
// for its position, so the next guesses are all right (4 + 1 = 5); those run past the computed nodes, so the
// guesses after them are padding again: 1, 5, 1, 5, ...
TEST(OracleStrategies, JacobiReachesTheFixedPoint) {
  V script = {1, 5, 6, 7};
  for (int i = 0; i < 40; ++i) script.push_back(static_cast<int32_t>(8 + (i * 5) % 7));
  OracleModel m(kVocab, 256, la::test::position_rule(script, 0));
  const V prompt(script.begin(), script.begin() + 4);
  la::StrategyOptions o;
  o.name = "jacobi";
  o.jacobi.block = 4;
  auto s = la::make_strategy(o);
  const Outcome r = generate_as_plain(*s, m, prompt, 30);
  EXPECT_EQ(r.kept, (std::vector<int>{1, 5, 1, 5, 1, 5, 1, 5, 1, 5}));
}

// Ouroboros (gamma 4, no extensions) with a draft model that is the target except for the tokens it predicts at
// positions 23, 30 and 31. The prompt ends at position 20. Step 1 drafts 21..24: 21, 22 right, 23 wrong: 2 + 1 = 3.
// Step 2 (root 23; the draft rolls back to 23) drafts 24..27, all right: 5. Step 3 drafts 29..32: 29 right, 30
// wrong: 2. Step 4 drafts 31..34, 31 wrong: 1. Then 5 per step (40 = 3+5+2+1+5*5+4).
TEST(OracleStrategies, OuroborosAcceptsTheDraftUpToItsFirstError) {
  OracleModel target(kVocab, 256, la::test::cycle_rule(kCycle));
  auto base = la::test::cycle_rule(kCycle);
  OracleModel draft(kVocab, 256, [base](const V& c) -> int32_t {
    const size_t p = c.size();  // the position of the token predicted
    return p == 23 || p == 30 || p == 31 ? 12 : base(c);
  });
  auto s = la::make_strategy(ouroboros_options(0), &draft);
  const Outcome r = generate_as_plain(*s, target, cycle_prompt(2), 40);
  EXPECT_EQ(r.kept, (std::vector<int>{3, 5, 2, 1, 5, 5, 5, 5, 5, 4}));
  EXPECT_GT(draft.forwards(), 0);
}

// Another group's request (Strategy::learn, --lp-size with --share-drafts): LADE (N = 4, G = 3, no prompt pool)
// learns every 4-gram ending at an output token of a request that decoded 40 tokens of the cycle, so the pool holds
// the whole cycle before the window harvested anything: every step yields N = 4 (LadeWindowFillsThePool, without
// learning, starts 1, 1, 1). The ids equal plain decoding's.
TEST(OracleStrategies, LadeLearnsAnotherGroupsRequest) {
  OracleModel m(kVocab, 256, la::test::cycle_rule(kCycle));
  const Finished other = another_request(m);
  auto s = la::make_strategy(lade_options(false));
  s->learn(other.tokens, other.prompt_len);
  const Outcome r = generate_as_plain(*s, m, cycle_prompt(2), 40);
  EXPECT_EQ(r.kept, std::vector<int>(10, 4));
  EXPECT_EQ(s->counters().at("lade_learned_requests"), 1.0);
}

// Ouroboros (gamma 4, K = 3 extensions, a draft model equal to the target): without a pool each step keeps the
// 4 drafts + 1 until its own corrections fill the pool; after learning another request's output (phrases of
// gamma + 1 = 5 tokens from each output position) the first step's chain end already has extensions, so it keeps
// more and the request takes fewer steps. The ids equal plain decoding's.
TEST(OracleStrategies, OuroborosLearnsAnotherGroupsRequest) {
  OracleModel target(kVocab, 256, la::test::cycle_rule(kCycle));
  OracleModel draft(kVocab, 256, la::test::cycle_rule(kCycle));
  const V prompt = cycle_prompt(2);
  const Finished other = another_request(target);
  const la::StrategyOptions o = ouroboros_options(3);
  auto fresh = la::make_strategy(o, &draft);
  const Outcome f = generate_as_plain(*fresh, target, prompt, 40);
  auto learned = la::make_strategy(o, &draft);
  learned->learn(other.tokens, other.prompt_len);
  const Outcome r = generate_as_plain(*learned, target, prompt, 40);
  EXPECT_EQ(r.ids, f.ids);
  EXPECT_EQ(f.kept.at(0), 5);
  EXPECT_GT(r.kept.at(0), 5);
  EXPECT_LT(r.kept.size(), f.kept.size());
  EXPECT_EQ(learned->counters().at("pool_learned_requests"), 1.0);
}

// An eos inside a verified draft ends the request there: the tokens verified after it are dropped.
TEST(OracleStrategies, EosInsideADraftEndsTheRequest) {
  const V cycle = {3, 4, 2, 5, 6, 7};  // 2 is the eos
  OracleModel m(kVocab, 256, la::test::cycle_rule(cycle), {2});
  // After the last 3, prompt lookup proposes 4 2 5 6 7 3 (what followed the first 3): all right, so the verdict
  // holds 7 tokens, but the eos is the second and ends the request.
  const V prompt = {1, 3, 4, 2, 5, 6, 7, 3};
  la::StrategyOptions o;
  o.name = "prompt-lookup";
  auto s = la::make_strategy(o);
  la::LocalExecutor ex(m);
  la::Generator g(ex, *s, m.config());
  la::GenParams gp;
  gp.max_new_tokens = 20;
  int verified = 0;
  const auto res = g.generate(prompt, gp, [&](const V&) { verified = 1; });
  EXPECT_EQ(verified, 1);
  EXPECT_EQ(res.ids, (V{4, 2}));
  EXPECT_EQ(res.stats.draft_tokens, 6);
  EXPECT_EQ(res.stats.finish_reason, "eos");
  EXPECT_EQ(res.stats.steps, 1);
  EXPECT_EQ(m.cache_len(), static_cast<int>(prompt.size()) + 1);  // the eos itself stays pending
}
