// The start-up self-check (lookahead/engine/selfcheck.h) on the CPU: its script, its comparison and its fallback
// chain, driven by fault injection (a candidate forward that corrupts one logit or id, one that throws), and the
// load hook (--selfcheck, describe()). On CPU the checked fast path is the CPU kernel forward; on a GPU the same code
// checks the CUDA kernels and graphs.
#include <gtest/gtest.h>

#include <cstdlib>

#include "lookahead/engine/llama.h"
#include "lookahead/engine/selfcheck.h"
#include "lookahead/util/error.h"

namespace la::test {
namespace {

const char* kModel = "random:tiny-gqa-bias:5";

std::unique_ptr<StepModel> base() {
  LoadOptions o;
  o.model = kModel;
  o.selfcheck = "off";
  return load_llama(o);
}

// Paths "kernels, graphs" and "kernels" are forks of one model (on CPU the graphs flag is ignored); `faults` says
// what goes wrong on each.
ServingPathFactory factory(const StepModel& m, SelfCheckFault graphs_fault, SelfCheckFault kernels_fault,
                           int at_forward = 2) {
  return [&m, graphs_fault, kernels_fault, at_forward](const ServingPath& p) {
    auto f = fork_with_kernels(m, p.kernels, p.graphs);
    if (!p.kernels) return f;
    return inject_fault(std::move(f), p.graphs ? graphs_fault : kernels_fault, at_forward);
  };
}

const std::vector<ServingPath> kChain{{true, true}, {true, false}};

TEST(SelfCheck, ScriptCoversBucketsTreesAndNonPrefixCommits) {
  const ModelConfig c = model_config_of(kModel);
  const auto s = selfcheck_script(c, {1, 16, 64}, 7);
  ASSERT_EQ(s.size(), 9u);  // three steps per bucket: warm-up, capture, replay
  int L = 0, non_prefix = 0;
  const int lo[] = {1, 3, 17}, hi[] = {1, 16, 64};
  for (size_t k = 0; k < s.size(); ++k) {
    const StepInput& in = s[k].step;
    const int T = static_cast<int>(in.tokens.size());
    EXPECT_GE(T, lo[k / 3]) << k;
    EXPECT_LE(T, hi[k / 3]) << k;
    if (k % 3 == 0) {
      EXPECT_EQ(T, hi[k / 3]) << "the first step of a bucket fills it";
    }
    for (int i = 0; i < T; ++i) {
      const int p = in.parents[i];
      ASSERT_TRUE(p >= -1 && p < i);
      EXPECT_EQ(in.positions[i], p < 0 ? L : in.positions[p] + 1);
      EXPECT_TRUE(in.tokens[i] >= 0 && in.tokens[i] < c.vocab);
    }
    const auto& cm = s[k].commit;
    ASSERT_FALSE(cm.empty());
    EXPECT_EQ(in.parents[cm[0]], -1);
    bool prefix = true;
    for (size_t j = 0; j < cm.size(); ++j) {
      if (j) {
        EXPECT_EQ(in.parents[cm[j]], cm[j - 1]) << "a root-to-node path";
      }
      prefix = prefix && cm[j] == static_cast<int>(j);
    }
    if (T > 1) {
      EXPECT_FALSE(prefix) << "multi-token steps commit a path that is not a prefix";
    }
    non_prefix += !prefix;
    L += static_cast<int>(cm.size());
  }
  EXPECT_EQ(non_prefix, 6);
  EXPECT_EQ(selfcheck_script(c, {1, 16, 64}, 7)[5].step.tokens, s[5].step.tokens) << "seeded";
}

TEST(SelfCheck, CleanPathServes) {
  auto m = base();
  const auto rep = run_selfcheck(factory(*m, SelfCheckFault::None, SelfCheckFault::None), kChain, {});
  ASSERT_EQ(rep.attempts.size(), 1u);
  EXPECT_TRUE(rep.attempts[0].ok) << rep.attempts[0].detail;
  EXPECT_TRUE(rep.serving == (ServingPath{true, true}));
  EXPECT_EQ(rep.steps, 9);
  EXPECT_NE(rep.summary().find("selfcheck passed"), std::string::npos) << rep.summary();
}

TEST(SelfCheck, CorruptLogitFallsBackToNextPath) {
  auto m = base();
  const auto rep = run_selfcheck(factory(*m, SelfCheckFault::Corrupt, SelfCheckFault::None), kChain, {});
  ASSERT_EQ(rep.attempts.size(), 2u);
  EXPECT_FALSE(rep.attempts[0].ok);
  EXPECT_NE(rep.attempts[0].detail.find("step 2 of 9"), std::string::npos) << rep.attempts[0].detail;
  EXPECT_NE(rep.attempts[0].detail.find("logit of id 3"), std::string::npos) << rep.attempts[0].detail;
  EXPECT_TRUE(rep.attempts[1].ok) << rep.attempts[1].detail;
  EXPECT_TRUE(rep.serving == (ServingPath{true, false}));
  EXPECT_NE(rep.summary().find("kernels, graphs failed"), std::string::npos) << rep.summary();
  EXPECT_NE(rep.summary().find("serving kernels"), std::string::npos) << rep.summary();
}

TEST(SelfCheck, WrongIdOnTheIdsOnlyPathIsCaught) {
  auto m = base();  // forward 3 is the first step that asks for ids only (the serving hot path)
  const auto rep = run_selfcheck(factory(*m, SelfCheckFault::None, SelfCheckFault::None), {{true, false}}, {});
  ASSERT_TRUE(rep.attempts[0].ok);
  const auto bad = run_selfcheck(factory(*m, SelfCheckFault::None, SelfCheckFault::Corrupt, 3), {{true, false}}, {});
  ASSERT_EQ(bad.attempts.size(), 1u);
  EXPECT_NE(bad.attempts[0].detail.find("step 3 of 9"), std::string::npos) << bad.attempts[0].detail;
  EXPECT_NE(bad.attempts[0].detail.find("next id"), std::string::npos) << bad.attempts[0].detail;
  EXPECT_TRUE(bad.serving == (ServingPath{false, false}));
}

TEST(SelfCheck, ThrowThenCorruptServesTheAtenForward) {
  auto m = base();
  const auto rep = run_selfcheck(factory(*m, SelfCheckFault::Throw, SelfCheckFault::Corrupt), kChain, {});
  ASSERT_EQ(rep.attempts.size(), 2u);
  EXPECT_NE(rep.attempts[0].detail.find("forward failed: injected fault"), std::string::npos)
      << rep.attempts[0].detail;
  EXPECT_NE(rep.attempts[1].detail.find("logit"), std::string::npos) << rep.attempts[1].detail;
  EXPECT_TRUE(rep.serving == (ServingPath{false, false}));
  EXPECT_NE(rep.summary().find("serving ATen forward"), std::string::npos) << rep.summary();
  EXPECT_NE(rep.json().find("\"serving\":\"ATen forward\""), std::string::npos) << rep.json();
}

TEST(SelfCheck, StrictNamesTheMismatch) {
  auto m = base();
  SelfCheckOptions o;
  o.mode = SelfCheckMode::Strict;
  try {
    run_selfcheck(factory(*m, SelfCheckFault::Corrupt, SelfCheckFault::None), kChain, o);
    FAIL() << "strict did not fail";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("--selfcheck strict: the kernels, graphs path"), std::string::npos) << w;
    EXPECT_NE(w.find("logit of id 3"), std::string::npos) << w;
  }
}

// The load hook: --selfcheck on a CPU fp32 model checks the CPU kernels; LOOKAHEAD_SELFCHECK_FAULT injects.
TEST(SelfCheck, LoadHookReportsTheServingPath) {
  LoadOptions o;
  o.model = kModel;
  o.selfcheck = "on";
  auto ok = load_llama(o);
  EXPECT_NE(ok->describe().find("selfcheck passed"), std::string::npos) << ok->describe();
  setenv("LOOKAHEAD_SELFCHECK_FAULT", "kernels=throw", 1);
  auto fell = load_llama(o);
  o.selfcheck = "strict";
  EXPECT_THROW(load_llama(o), Error);
  unsetenv("LOOKAHEAD_SELFCHECK_FAULT");
  EXPECT_NE(fell->describe().find("serving ATen forward"), std::string::npos) << fell->describe();
  // The fallback serves the reference: same ids as a --kernels off model.
  LoadOptions r = o;
  r.kernels = "off";
  r.selfcheck = "off";
  auto ref = load_llama(r);
  const StepInput in = StepInput::chain({1, 5, 9, 2}, 0);
  EXPECT_EQ(fell->forward(in, {}), ref->forward(in, {}));
  o.selfcheck = "sometimes";
  EXPECT_THROW(load_llama(o), Error);
  EXPECT_FALSE(selfcheck_reports().empty());
}

}  // namespace
}  // namespace la::test
