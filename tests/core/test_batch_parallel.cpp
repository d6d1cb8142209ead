// Continuous batching under lookahead parallelism (batch_runner.h over a ParallelExecutor, parallel_executor.h):
// a batch of requests over an in-process group of K = 2 and 3 replicas, every replica holding every slot's cache,
// each decoding slot's plan split by the partition, gives every request the ids of decoding it alone on one
// replica (plain decoding), for LADE, trie and suffix with adaptive drafting and for fixed drafts (LADE, trie,
// suffix), --batch 2..4, prompts of different lengths fed in small chunks. The model is an oracle
// (oracle_model.h) whose next token depends on a node's whole ancestor chain and that checks positions, so a replica that runs a
// slot's part against another slot's cache, or that skips its pending chain, gives other tokens or throws.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/oracle_model.h"
#include "lookahead/decode/batch_runner.h"
#include "lookahead/decode/executor.h"
#include "lookahead/decode/generator.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/parallel/parallel_executor.h"

namespace la {
namespace {

using V = std::vector<int32_t>;
using test::OracleModel;

constexpr int kVocab = 24;
constexpr int kContext = 512;
constexpr int kNew = 40;

// A cyclic text with a deviation wherever a hash of the whole chain says so: drafts from pools, tries and suffix
// trees are accepted often but not always, and any wrong cache or position changes the continuation.
test::Rule noisy_cycle() {
  const test::Rule cycle = test::cycle_rule({3, 4, 3, 5, 6, 7, 8, 9, 10, 11, 12, 4, 13});
  return [cycle](const V& c) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : c) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
    if ((h >> 7) % 9 == 0) return static_cast<int32_t>((h >> 20) % kVocab);
    return cycle(c);
  };
}

// Prompts of different lengths: pieces of the cycle, noise, a long one (several chunks).
std::vector<V> prompts() {
  return {{1, 3, 4, 3, 5, 6},
          {1, 7},
          {1, 14, 15, 16, 3, 4, 3, 5, 6, 7, 8, 9, 10, 11, 12, 4, 13, 3, 4},
          {1, 20, 21, 22, 23, 2},
          {1, 9, 10, 11, 12, 4, 13, 3, 4, 3, 5, 6, 7, 8, 9, 10, 11, 12, 4, 13, 3, 4, 3, 5, 6, 7, 8, 9, 10, 11},
          {1, 5},
          {1, 12, 4, 13, 3, 17, 18},
          {1, 3, 4, 3, 5, 6, 7, 8, 9, 10, 11, 12}};
}

// Decoding one prompt alone on one replica, plain (no drafts).
V plain(const V& prompt) {
  OracleModel m(kVocab, kContext, noisy_cycle());
  LocalExecutor ex(m);
  auto ar = make_ar_strategy();
  Generator g(ex, *ar, m.config());
  GenParams gp;
  gp.max_new_tokens = kNew;
  return g.generate(prompt, gp).ids;
}

struct Config {
  std::string strategy;
  bool adaptive;
};

ForwardCostModel affine(double a, double b) {
  ForwardCostModel f(256);
  for (int t : f.buckets()) f.set(t, a + b * t);
  return f;
}

StrategyOptions options(const Config& c) {
  StrategyOptions o;
  o.name = c.strategy;
  o.adaptive = c.adaptive;
  if (o.name == "lade") o.lade.pool_from_prompt = true;
  return o;
}

struct GroupRun {
  std::vector<V> ids;
  ParallelCounters par;
  BatchCounters batch;
};

// Every prompt through a BatchRunner of `slots` over K in-process replicas, admitted in order as slots free.
GroupRun run_over_group(const Config& c, int k, int slots, int chunk) {
  OracleModel model(kVocab, kContext, noisy_cycle());
  ParallelExecutor par(std::make_unique<InProcessGroup>(model, k));
  auto strategy = make_strategy(options(c));
  StepCostModel cost(affine(1e-3, 2e-5), k, 0);
  // No clock in the choices: the oracle's steps take microseconds, so under load (or ASan) the measured planning
  // time priced drafts out and the controllers slept through whole runs now and then ("no drafts" failed in 17 of
  // 150 loaded ASan runs). Frozen costs without host time make every run draft by the affine curve alone.
  cost.freeze();
  AdaptiveOptions ao;
  ao.host_overhead = false;
  std::function<std::unique_ptr<DraftController>(Strategy&)> make;
  if (c.adaptive) make = [&cost, ao](Strategy& s) { return std::make_unique<DraftController>(s, cost, ao); };
  BatchOptions bo;
  bo.slots = slots;
  bo.prefill_chunk = chunk;
  BatchRunner br(model, *strategy, model.config(), bo, c.adaptive ? &cost : nullptr, make, &par);
  const std::vector<V> ps = prompts();
  GroupRun run;
  run.ids.resize(ps.size());
  size_t next = 0;
  auto done = [&](int slot) {
    const size_t i = static_cast<size_t>(br.tag(slot));
    run.ids[i].assign(br.runner(slot).seq().begin() + static_cast<long>(ps[i].size()), br.runner(slot).seq().end());
    br.release(slot);
  };
  while (true) {
    while (next < ps.size() && br.fits_now(static_cast<int>(ps[next].size()), kNew)) {
      SampleParams sp;
      sp.stream = next;
      const int slot = br.add(static_cast<int64_t>(next), ps[next], sp, StepLimits{kContext, kNew, true});
      ++next;
      if (br.runner(slot).done()) done(slot);
    }
    if (br.active() == 0) break;
    br.step();
    for (int slot : br.finished()) done(slot);
  }
  run.par = par.counters();
  run.batch = br.counters();
  return run;
}

class BatchParallel : public ::testing::TestWithParam<Config> {};

// Every request's ids equal plain decoding alone, for K = 2, 3 and --batch 2..4; fixed drafts really split
// branches (parts hold more than the plan plus a root per other replica).
TEST_P(BatchParallel, EveryRequestEqualsDecodingItAlone) {
  const Config c = GetParam();
  const std::vector<V> ps = prompts();
  std::vector<V> want;
  for (const V& p : ps) want.push_back(plain(p));
  for (int k : {2, 3}) {
    for (int slots : {2, 3, 4}) {
      const GroupRun r = run_over_group(c, k, slots, 4);
      for (size_t i = 0; i < ps.size(); ++i)
        ASSERT_EQ(r.ids[i], want[i]) << c.strategy << (c.adaptive ? " adaptive" : " fixed") << ", K = " << k
                                     << ", --batch " << slots << ", request " << i;
      EXPECT_GT(r.batch.max_active, 1) << "requests were never batched";
      EXPECT_GT(r.par.plan_nodes, static_cast<uint64_t>(r.batch.slot_steps)) << "no drafts";
      int64_t capped = 0;  // adaptive: the batch's draft cap (draft_cap.h) chose the budgets' bound
      for (int64_t n : r.batch.cap_steps) capped += n;
      EXPECT_EQ(capped > 0, c.adaptive) << "draft cap steps: " << capped;
      if (!c.adaptive) {
        EXPECT_GT(r.par.part_nodes, r.par.plan_nodes + uint64_t(k - 1) * r.batch.slot_steps)
            << "the partition never gave a replica but the first a branch";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, BatchParallel,
                         ::testing::Values(Config{"lade", true}, Config{"trie", true}, Config{"suffix", true},
                                           Config{"lade", false}, Config{"trie", false}, Config{"suffix", false}),
                         [](const ::testing::TestParamInfo<Config>& i) {
                           std::string n = i.param.strategy + (i.param.adaptive ? "_adaptive" : "_fixed");
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// The group's replicas fall out of step: a worker's cache length that is not the one rank 0 partitioned for ends
// the run with an error naming the rank and the batch slot (a replica run against another slot's cache is caught
// the same way or by the merge).
TEST(BatchParallelErrors, AReplicaOutOfStepIsOneClearError) {
  OracleModel model(kVocab, kContext, noisy_cycle());
  InProcessGroup group(model, 2);
  ParallelExecutor par(group);
  const V prompt = {1, 3, 4, 3, 5, 6};
  par.begin_slot(0, prompt, SampleParams{}, 64);
  par.begin_slot(1, prompt, SampleParams{}, 64);
  V seq = prompt;
  par.stage_chunk(0, seq, 8);
  par.run_staged();
  // Slot 1's chunk goes to the group behind the executor's back: its caches now lead what rank 0 tracks.
  std::vector<PartReply> replies;
  group.run_slots({SlotWork{1, &seq, 1, nullptr}}, replies);
  par.stage_chunk(1, seq, 2);
  try {
    par.run_staged();
    FAIL() << "a replica out of step was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 0 is out of step in batch slot 1"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace la
