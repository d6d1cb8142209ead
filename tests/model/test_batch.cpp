// Continuous batching (decode/batch_runner.h) is exact: every request's ids in a batch equal decoding it alone,
// whatever the batch size, the arrival order, the prompt chunking and the neighbours, for every strategy, in fp32,
// bf16 and fp16, on 1 and 2 threads and every ISA path, with fixed and adaptive drafts, greedy and sampled. And the
// mechanism under it: a forward over several replicas' steps (StepModel::forward_batch, one GEMM over every row)
// gives each step's logits the same bits as its forward alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

#include "common.h"
#include "lookahead/backend/cpu/isa.h"
#include "common/isa_paths.h"
#include "common/load_model.h"
#include "common/random_tree.h"
#include "lookahead/decode/batch_runner.h"

using namespace la;
using namespace la::test;

namespace {

// The prompts through a BatchRunner, admitted in `order`, `slots` in flight; ids per prompt index.
std::vector<std::vector<int32_t>> run_batch(StepModel& m, Strategy& s, const std::vector<std::vector<int32_t>>& ps,
                                            const GenParams& gp, int slots, int chunk, std::vector<size_t> order,
                                            StepCostModel* cost = nullptr, BatchCounters* bc = nullptr,
                                            RequestStats* total = nullptr) {
  BatchOptions bo;
  bo.slots = slots;
  bo.prefill_chunk = chunk;
  std::function<std::unique_ptr<DraftController>(Strategy&)> make;
  if (cost) make = [cost](Strategy& st) { return std::make_unique<DraftController>(st, *cost); };
  BatchRunner br(m, s, m.config(), bo, cost, make);
  std::vector<std::vector<int32_t>> out(ps.size());
  size_t next = 0;
  auto done = [&](int slot) {
    const size_t i = size_t(br.tag(slot));
    out[i].assign(br.runner(slot).seq().begin() + long(ps[i].size()), br.runner(slot).seq().end());
    if (total) total->add(br.runner(slot).stats());
    br.release(slot);
  };
  while (true) {
    while (next < order.size() && br.fits_now(int(ps[order[next]].size()), gp.max_new_tokens)) {
      const size_t i = order[next++];
      SampleParams sp = gp.sample;
      sp.stream = i;
      const int slot = br.add(int64_t(i), ps[i], sp, StepLimits{m.config().max_positions, gp.max_new_tokens, true});
      if (br.runner(slot).done()) done(slot);
    }
    if (br.active() == 0) break;
    br.step();
    for (int slot : br.finished()) done(slot);
  }
  if (bc) *bc = br.counters();
  return out;
}

std::vector<size_t> shuffled(size_t n, unsigned seed) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

std::vector<StrategyOptions> every_strategy() {
  std::vector<StrategyOptions> v;
  for (const char* n : {"ar", "jacobi", "lade", "trie", "prompt-lookup", "suffix", "ouroboros"}) {
    StrategyOptions o;
    o.name = n;
    if (o.name == "lade") o.lade.pool_from_prompt = true;
    if (o.name == "ouroboros") o.ouroboros.draft_model = llama2xs();
    v.push_back(o);
  }
  return v;
}

std::unique_ptr<Strategy> make(const StrategyOptions& o, std::unique_ptr<StepModel>& draft, const std::string& dtype) {
  if (o.name == "ouroboros" && !draft) draft = load_model(llama2xs(), dtype);
  return make_strategy(o, o.name == "ouroboros" ? draft.get() : nullptr);
}

// Two forks of `base` per {cache length, step rows}, the pair over the same random context of that length, and a
// random tree of that many rows on top of it: one fork runs in a batch, the other alone.
struct ReplicaPairs {
  std::vector<std::unique_ptr<StepModel>> solo, batched;
  std::vector<StepInput> steps;
};

ReplicaPairs replica_pairs(StepModel& base, const std::vector<std::pair<int, int>>& shapes, std::mt19937& rng) {
  const int V = base.config().vocab;
  ReplicaPairs r;
  for (auto [L, T] : shapes) {
    r.solo.push_back(base.fork());
    r.batched.push_back(base.fork());
    std::vector<int32_t> ctx(L);
    for (auto& x : ctx) x = int32_t(rng() % V);
    append_chain(*r.solo.back(), ctx);
    append_chain(*r.batched.back(), ctx);
    r.steps.push_back(random_tree(T, L, V, rng));
  }
  return r;
}


}  // namespace

// The mechanism: replicas with caches of different lengths, steps of different shapes (a chain, trees, one token),
// all in one forward_batch; every item's logits are memcmp-equal to its forward alone, in every dtype, on 1 and 2
// threads. A kernel whose reduction order followed the number of rows in the forward would fail here.
TEST(BatchForward, EveryItemsLogitsAreTheBitsOfItsForwardAlone) {
  for (const std::string& model : {stories(), std::string("random:tiny-gqa-bias:4"), std::string("random:tiny-gemma2:3")})
    for (const char* dtype : {"fp32", "bf16", "fp16"})
      for (int threads : {1, 2}) {
        auto base = load_model(model, dtype, "on", threads);
        std::mt19937 rng(7);
        auto [solo, batched, steps] =  // {cache length, step rows}
            replica_pairs(*base, {{3, 1}, {17, 9}, {0, 24}, {40, 5}, {9, 1}, {28, 13}}, rng);
        const int n = static_cast<int>(steps.size());
        std::vector<std::vector<int32_t>> out(n);
        std::vector<std::vector<float>> lg(n);
        std::vector<BatchItem> items;
        const SampleParams sp;
        for (int i = 0; i < n; ++i) items.push_back(BatchItem{batched[i].get(), &steps[i], &sp, &out[i], &lg[i]});
        base->forward_batch(items.data(), n);
        for (int i = 0; i < n; ++i) {
          std::vector<float> alone;
          const auto ids = solo[i]->forward(steps[i], sp, &alone);
          ASSERT_EQ(ids, out[i]) << model << " " << dtype << " threads " << threads << " item " << i;
          ASSERT_EQ(alone.size(), lg[i].size());
          ASSERT_EQ(0, std::memcmp(alone.data(), lg[i].data(), alone.size() * sizeof(float)))
              << model << " " << dtype << " threads " << threads << " item " << i << ": logits differ in a batch";
        }
      }
}

// Rows without outputs (StepInput::first_output: a prompt chunk, a pending chain) get no final norm and no logits
// on the CPU kernels; every other row's token must be the one of its step alone with every row's logits, greedy and
// sampled, in a batch beside chunks and alone, and the skipped rows' results are -1. A forward that packed the
// output rows' logits wrongly (a row reading another's norm, a segment's rows offset by the skipped ones) fails here.
TEST(BatchForward, RowsWithoutOutputsLeaveEveryOtherRowsTokenAsWithAllLogits) {
  for (const std::string& model : {stories(), std::string("random:tiny-gemma2:3")})
    for (const char* dtype : {"fp32", "bf16"})
      for (const bool greedy : {true, false}) {
        auto base = load_model(model, dtype, "on", 2);
        std::mt19937 rng(11);
        SampleParams sp;
        if (!greedy) sp.temperature = 0.9f, sp.seed = 5;
        // {cache length, step rows}, and each step's first output: a prompt chunk (no outputs) first, then trees
        // with a pending chain, chunks between them, one lone token.
        auto [solo, batched, full] = replica_pairs(*base, {{0, 24}, {17, 9}, {3, 1}, {40, 30}, {9, 12}, {28, 13}}, rng);
        const int first[] = {24, 2, 0, 30, 0, 12};
        std::vector<StepInput> steps = full;
        for (size_t i = 0; i < steps.size(); ++i) steps[i].first_output = first[i];
        const int n = static_cast<int>(steps.size());
        std::vector<std::vector<int32_t>> out(n);
        std::vector<BatchItem> items;
        for (int i = 0; i < n; ++i) items.push_back(BatchItem{batched[i].get(), &steps[i], &sp, &out[i], nullptr});
        base->forward_batch(items.data(), n);
        for (int i = 0; i < n; ++i) {
          const auto want = solo[i]->forward(full[i], sp);  // every row's logits
          const auto alone = solo[i]->forward(steps[i], sp);  // the same step alone, with its first output
          for (int t = 0; t < int(want.size()); ++t) {
            const int32_t expect = t < steps[i].first_output ? -1 : want[t];
            ASSERT_EQ(out[i][t], expect) << model << " " << dtype << (greedy ? " greedy" : " sampled") << " item "
                                         << i << " row " << t << " (batched)";
            ASSERT_EQ(alone[t], expect) << model << " " << dtype << (greedy ? " greedy" : " sampled") << " item "
                                        << i << " row " << t << " (alone)";
          }
        }
      }
}

// Every strategy, every dtype: each request's ids in batches of 3 and 8 (shuffled arrival, prompts fed in chunks
// of 5 between the others' steps) equal decoding it alone with plain greedy decoding.
TEST(Batch, EveryStrategyAndDtypeEqualsDecodingAlone) {
  for (const char* dtype : {"fp32", "bf16", "fp16"}) {
    auto m = load_model(stories(), dtype);
    auto ps = prompt_ids(8, m->config().vocab);  // 8 stories + 3 repetitive texts
    GenParams gp;
    gp.max_new_tokens = 40;
    auto ar = make_ar_strategy();
    const auto want = run_all(*m, *ar, ps, gp);
    std::unique_ptr<StepModel> draft;
    for (const auto& o : every_strategy())
      for (int slots : {3, 8}) {
        auto s = make(o, draft, dtype);
        const auto got = run_batch(*m, *s, ps, gp, slots, 5, shuffled(ps.size(), unsigned(slots)));
        for (size_t i = 0; i < ps.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << dtype << " " << o.name << " batch " << slots << " prompt " << i;
      }
  }
}

// Adaptive drafting in a batch (one cost model, a controller per request told the rest of the step): exact under
// the calibrated cost and the two extremes; a flat cost drafts, a steep one keeps every request plain.
TEST(Batch, AdaptiveDraftingInABatchEqualsDecodingAlone) {
  auto m = load_model(stories(), "fp32");
  auto ps = prompt_ids(8, m->config().vocab);
  GenParams gp;
  gp.max_new_tokens = 40;
  auto ar = make_ar_strategy();
  const auto want = run_all(*m, *ar, ps, gp);
  std::unique_ptr<StepModel> draft;
  for (const auto& o : every_strategy()) {
    if (o.name == "ar") continue;
    for (auto shape : {CostShape::Calibrated, CostShape::Flat, CostShape::Steep}) {
      auto s = make(o, draft, "fp32");
      StepCostModel cost = cost_shape(*m, *s, shape);
      BatchCounters bc;
      RequestStats st;
      const auto got = run_batch(*m, *s, ps, gp, 4, 64, shuffled(ps.size(), 3), &cost, &bc, &st);
      for (size_t i = 0; i < ps.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << o.name << " shape " << int(shape) << " prompt " << i;
      if (shape == CostShape::Flat) { EXPECT_GT(bc.draft_rows, 0) << o.name; }
      EXPECT_GT(bc.draft_paid_s, 0) << o.name << ": the slots' controllers do not share the batch's ledger";
      if (shape == CostShape::Steep) { EXPECT_EQ(st.budgets.plain_steps, st.steps) << o.name; }
    }
  }
}

// Sampling is keyed by request stream and position: a batch draws each request's tokens as decoding it alone.
TEST(Batch, SampledRequestsEqualDecodingAlone) {
  auto m = load_model(stories(), "fp32");
  auto ps = prompt_ids(6, m->config().vocab);
  GenParams gp;
  gp.max_new_tokens = 40;
  gp.sample.temperature = 0.8f;
  gp.sample.top_p = 0.9f;
  gp.sample.seed = 11;
  std::unique_ptr<StepModel> draft;
  for (const auto& o : every_strategy()) {
    auto alone = make(o, draft, "fp32");
    const auto want = run_all(*m, *alone, ps, gp);
    auto s = make(o, draft, "fp32");
    const auto got = run_batch(*m, *s, ps, gp, 4, 7, shuffled(ps.size(), 5));
    for (size_t i = 0; i < ps.size(); ++i) ASSERT_EQ(got[i], want[i]) << o.name << " prompt " << i;
  }
}

// Two threads, every ISA path (AVX-512 where the CPU has it): batched ids equal plain decoding alone on one thread
// with the detected path.
TEST(Batch, ThreadsAndIsaPathsDoNotChangeTokens) {
  auto ref = load_model(stories(), "bf16", "on", 1);
  auto ps = prompt_ids(8, ref->config().vocab);
  GenParams gp;
  gp.max_new_tokens = 32;
  auto ar = make_ar_strategy();
  const auto want = run_all(*ref, *ar, ps, gp);
  const CpuIsa detected = detected_cpu_isa();
  for (CpuIsa isa : test::isa_paths()) {
    set_cpu_isa(isa);
    auto m = load_model(stories(), "bf16", "on", 2);
    StrategyOptions o;
    o.name = "suffix";
    auto s = make_strategy(o);
    const auto got = run_batch(*m, *s, ps, gp, 5, 4, shuffled(ps.size(), 9));
    for (size_t i = 0; i < ps.size(); ++i) ASSERT_EQ(got[i], want[i]) << cpu_isa_name(isa) << " prompt " << i;
  }
  set_cpu_isa(detected);
}

// The KV budget: a request waits while the others hold the rows (at most as many in flight as fit).
TEST(Batch, KvBudgetBoundsRequestsInFlight) {
  auto m = load_model(stories(), "fp32");
  auto ps = prompt_ids(8, m->config().vocab);
  GenParams gp;
  gp.max_new_tokens = 30;
  auto ar = make_ar_strategy();
  BatchOptions bo;
  bo.slots = 8;
  bo.prefill_chunk = 16;
  BatchRunner probe(*m, *ar, m->config(), bo, nullptr);
  int64_t most = 0;
  for (auto& p : ps) most = std::max(most, probe.rows_needed(int(p.size()), gp.max_new_tokens));
  bo.kv_rows = 2 * most + 1;  // room for two of the largest requests
  BatchRunner br(*m, *ar, m->config(), bo, nullptr);
  size_t next = 0;
  int done = 0;
  while (done < int(ps.size())) {
    while (next < ps.size() && br.fits_now(int(ps[next].size()), gp.max_new_tokens)) {
      br.add(int64_t(next), ps[next], SampleParams{}, StepLimits{m->config().max_positions, gp.max_new_tokens, true});
      ++next;
    }
    ASSERT_GT(br.active(), 0);
    br.step();
    for (int s : br.finished()) br.release(s), ++done;
  }
  EXPECT_GE(br.counters().max_active, 2);
  EXPECT_LT(br.counters().max_active, 8);  // below the 8 slots: the rows bound it
  BatchOptions tiny = bo;
  tiny.kv_rows = 10;
  BatchRunner none(*m, *ar, m->config(), tiny, nullptr);
  EXPECT_FALSE(none.fits_ever(int(ps[0].size()), gp.max_new_tokens));
}
