// ParallelExecutor over the in-process replica group (hash "models", no libtorch): the same tokens as one
// LocalExecutor for K = 1..5, bounded per-step records, and the two ways replicas can fall out of step ending the
// run with an error naming the rank and the step: a replica computing a different result for a node another one
// also computed (disagreement), and a replica whose cache length is not the one rank 0 partitioned for.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "common/hash_model.h"
#include "lookahead/decode/step_plan.h"
#include "lookahead/parallel/parallel_executor.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

using test::HashModel;

// A replica that returns wrong results for every node from its `bad_call`-th forward on (fault injection).
class FaultyModel : public HashModel {
 public:
  FaultyModel(int vocab, int bad_call) : HashModel(vocab), vocab_(vocab), bad_call_(bad_call) {}
  std::vector<int32_t> forward(const StepInput& s, const SampleParams& sp, std::vector<float>* l) override {
    auto out = HashModel::forward(s, sp, l);
    if (++calls_ >= bad_call_)
      for (auto& x : out) x = (x + 1) % vocab_;
    return out;
  }

 private:
  int vocab_, bad_call_, calls_ = 0;
};

// Drafts: random trees over a tiny vocabulary, so multi-token paths get accepted often.
StepPlan random_plan(std::mt19937& rng, int32_t root, int vocab) {
  StepPlan p;
  p.reset(root);
  const int n = 1 + static_cast<int>(rng() % 24);
  for (int i = 1; i < n; ++i) {
    const int parent = i > 1 && rng() % 3 != 0 ? i - 1 : static_cast<int>(rng() % i);
    p.add(static_cast<int32_t>(rng() % vocab), parent, p.draft[parent] && rng() % 5 != 0);
  }
  return p;
}

// Runs `steps` steps of greedy generation through `ex`; returns the generated sequence.
std::vector<int32_t> generate(StepExecutor& ex, int steps, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> seq = {1, 2, 0, 1}, results;
  ex.begin(seq, SampleParams{});
  for (int s = 0; s < steps; ++s) {
    const StepPlan plan = random_plan(rng, seq.back(), vocab);
    ex.run(seq, plan, results);
    const Verdict v = verify_plan(plan, results);
    seq.insert(seq.end(), v.tokens.begin(), v.tokens.end());
    ex.commit(seq, v.path);
  }
  ex.end();
  return seq;
}

struct Replicas {
  std::vector<std::unique_ptr<HashModel>> models;
  std::vector<StepModel*> ptrs;
  Replicas(int k, int vocab, int faulty_rank = -1, int bad_call = 0) {
    for (int r = 0; r < k; ++r) {
      models.push_back(r == faulty_rank ? std::make_unique<FaultyModel>(vocab, bad_call)
                                        : std::make_unique<HashModel>(vocab));
      ptrs.push_back(models.back().get());
    }
  }
};

TEST(ParallelExecutor, InProcessGroupMatchesOneReplica) {
  const int vocab = 3;
  HashModel ref_model(vocab);
  LocalExecutor ref(ref_model);
  const auto want = generate(ref, 60, vocab, 7);
  EXPECT_GT(want.size(), 4u + 60u + 10u);  // drafts were accepted (more tokens than steps)
  for (int k = 1; k <= 5; ++k) {
    SCOPED_TRACE(testing::Message() << "k=" << k);
    Replicas reps(k, vocab);
    InProcessGroup group(reps.ptrs);
    ParallelExecutor ex(group);
    EXPECT_EQ(generate(ex, 60, vocab, 7), want);
    const auto c = ex.counters();
    EXPECT_EQ(c.ranks, k);
    EXPECT_EQ(c.steps, 60u);
    EXPECT_GE(c.part_nodes, c.plan_nodes);
    EXPECT_TRUE(ex.steps().empty());  // no per-step records unless asked for
  }
}

TEST(ParallelExecutor, StepRecordsAreBounded) {
  const int vocab = 3, k = 3;
  {
    Replicas reps(k, vocab);
    InProcessGroup group(reps.ptrs);
    ParallelOptions opt;
    opt.record_limit = 30 * k;
    ParallelExecutor ex(group, opt);
    generate(ex, 30, vocab, 3);
    ASSERT_EQ(ex.steps().size(), 30u);
    EXPECT_EQ(ex.steps()[0].step_tokens.size(), size_t(k));
  }
  Replicas reps(k, vocab);
  InProcessGroup group(reps.ptrs);
  ParallelOptions opt;
  opt.record_limit = 30 * k;
  ParallelExecutor ex(group, opt);
  generate(ex, 31, vocab, 3);
  EXPECT_TRUE(ex.steps().empty());  // past the limit: none kept
}

TEST(ParallelExecutor, DisagreementEndsTheRunNamingRankAndStep) {
  const int vocab = 3;
  // Rank 2's replica goes wrong at its 7th forward (the prefill is the 1st, so step 6): its copy of the root
  // differs from rank 0's.
  Replicas reps(3, vocab, /*faulty_rank=*/2, /*bad_call=*/7);
  InProcessGroup group(reps.ptrs);
  ParallelExecutor ex(group);
  try {
    generate(ex, 20, vocab, 11);
    ADD_FAILURE() << "no error for a replica that disagrees";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ranks disagree at step 6 of request 1: rank 2 computed"), std::string::npos) << m;
    EXPECT_NE(m.find("where rank 0 computed"), std::string::npos) << m;
  }
}

// A group whose replica 1 reports one token more in its cache than it has from step `from` on.
class LyingGroup : public InProcessGroup {
 public:
  LyingGroup(std::vector<StepModel*> m, int from) : InProcessGroup(std::move(m)), from_(from) {}
  void run(const std::vector<int32_t>& seq, const std::vector<PlanPart>& parts,
           std::vector<PartReply>& replies) override {
    InProcessGroup::run(seq, parts, replies);
    if (++calls_ >= from_) replies[1].cache_len += 1;
  }

 private:
  int from_, calls_ = 0;
};

TEST(ParallelExecutor, ReplicaCacheOutOfStepIsAnError) {
  const int vocab = 3;
  Replicas reps(2, vocab);
  LyingGroup group(reps.ptrs, 4);
  ParallelExecutor ex(group);
  try {
    generate(ex, 10, vocab, 5);
    ADD_FAILURE() << "no error for a replica whose cache is out of step";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1 is out of step at step 4 of request 1"), std::string::npos) << m;
  }
}

TEST(ParallelExecutor, BadArguments) {
  HashModel m(3);
  EXPECT_THROW(InProcessGroup(m, 0), Error);
  EXPECT_THROW(InProcessGroup(m, 2), Error);  // HashModel cannot be forked
  std::vector<StepModel*> none;
  EXPECT_THROW(InProcessGroup{none}, Error);
}

}  // namespace
}  // namespace la
