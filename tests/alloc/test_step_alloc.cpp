// No allocation per step: generation through the real Generator (StepRunner, LocalExecutor) over an oracle model
// (oracle_model.h), with the global operator new replaced by one that counts while a step runs. After warm-up
// (buffers at their largest, the pool or trie holding every n-gram or branch of the oracle's cycle) a step must
// not allocate: a per-step copy of the sequence, a fresh result vector or an allocating pool lookup fails this.
// The oracle's own forward is not counted (a real forward allocates tensors; it is the model's business). Its own
// binary, because it replaces operator new; not built under the sanitizers, which replace it themselves.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "lookahead/backend/cpu/cpu_forward.h"
#include "lookahead/decode/batch_runner.h"
#include "lookahead/backend/cpu/thread_pool.h"
#include "lookahead/decode/executor.h"
#include "lookahead/decode/generator.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/parallel/parallel_executor.h"
#include "common/oracle_model.h"

namespace {
thread_local bool g_counting = false;
thread_local long g_allocs = 0;
std::atomic<bool> g_counting_all{false};  // every thread (the CPU forward's pool workers too)
std::atomic<long> g_allocs_all{0};

void* counted_alloc(std::size_t n) {
  if (g_counting_all.load(std::memory_order_relaxed)) g_allocs_all.fetch_add(1, std::memory_order_relaxed);
  if (g_counting) {
    ++g_allocs;
    if (std::getenv("LA_ALLOC_TRAP")) std::abort();  // for a debugger's backtrace of the allocation
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (g_counting) ++g_allocs;
  if (g_counting_all.load(std::memory_order_relaxed)) g_allocs_all.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  if (g_counting) ++g_allocs;
  if (g_counting_all.load(std::memory_order_relaxed)) g_allocs_all.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using V = std::vector<int32_t>;

namespace {

// The oracle's forward is not counted (a real forward allocates tensors: the model's business): counting pauses
// while it runs and resumes after (each model, and each fork of it, keeps its own paused state).
void pause_counting_in_forward(la::test::OracleModel& m) {
  m.set_scope([paused = false](bool in_forward) mutable {
    if (in_forward) {
      paused = g_counting;
      g_counting = false;
    } else {
      g_counting = paused;
    }
  });
}

struct Counted {
  long allocs = 0;
  int64_t controller_steps = 0;  // steps whose budget a DraftController chose
  int steps = 0;  // steps counted
  int tokens = 0;
};

// With `adaptive`, a DraftController chooses every step's budget over a cost model the executor keeps current
// (flat: drafts pay, so the controller drafts and probes; the choice, the statistics and the cost update must not
// allocate either).
// Generates `max_new` tokens and counts the allocations of the steps between the one that passes `from` tokens
// and the one that passes `to` (the counting starts and stops in the streaming callback, which runs between
// steps and allocates nothing itself).
Counted count_steps(la::Strategy& s, int max_new, int from, int to, bool adaptive = false) {
  const V cycle = {3, 4, 3, 5, 6, 7, 8, 9, 10, 11};
  la::test::OracleModel m(16, 1024, la::test::cycle_rule(cycle));
  pause_counting_in_forward(m);
  la::LocalExecutor ex(m);
  la::Generator g(ex, s, m.config());
  // Frozen costs, no host time: the controller's choices (and its ledger's sleeps, draft_controller.h) do not
  // depend on this machine's timings, so the steps counted are the same on every run.
  la::StepCostModel cost(la::ForwardCostModel(256, 1e-3));
  cost.freeze();
  la::AdaptiveOptions ao;
  ao.host_overhead = false;
  la::DraftController controller(s, cost, ao);
  if (adaptive) {
    g.set_controller(&controller);
  }
  la::GenParams gp;
  gp.max_new_tokens = max_new;
  V prompt = {1};
  for (int i = 0; i < 3; ++i) prompt.insert(prompt.end(), cycle.begin(), cycle.end());
  Counted c;
  int calls = 0;
  auto res = g.generate(prompt, gp, [&](const V& ids) {
    ++calls;
    const int n = static_cast<int>(ids.size());
    if (g_counting) ++c.steps;
    if (!g_counting && n >= from && n < to && c.steps == 0) { g_allocs = 0; g_counting = true; c.tokens = -n; }
    else if (g_counting && n >= to) { g_counting = false; c.allocs = g_allocs; c.tokens += n; }
  });
  g_counting = false;
  EXPECT_EQ(static_cast<int>(res.ids.size()), max_new);
  c.controller_steps = res.stats.adaptive ? res.stats.budgets.steps : 0;
  return c;
}

void expect_no_allocation(const la::StrategyOptions& o, bool adaptive = false) {
  auto s = la::make_strategy(o);
  const Counted c = count_steps(*s, 400, 150, 350, adaptive);
  const std::string name = o.name + (adaptive ? " (adaptive)" : "");
  EXPECT_GT(c.steps, 10) << name;
  EXPECT_GT(c.tokens, c.steps) << name << ": the strategy must draft for this test to mean anything";
  EXPECT_EQ(c.allocs, 0) << name << ": " << c.allocs << " allocations in " << c.steps << " steps";
  if (adaptive) {
    EXPECT_GT(c.controller_steps, 10) << name << ": the controller must have chosen the budgets";
  }
  std::printf("%s: %ld allocations in %d steps (%d tokens)\n", name.c_str(), c.allocs, c.steps, c.tokens);
}

}  // namespace

TEST(StepAllocations, CounterSeesAnAllocation) {
  g_allocs = 0;
  g_counting = true;
  auto* v = new std::vector<int>(100);
  g_counting = false;
  delete v;
  EXPECT_EQ(g_allocs, 2);
}

TEST(StepAllocations, LadeStepsAllocateNothing) {
  la::StrategyOptions o;
  o.name = "lade";
  expect_no_allocation(o);
}

TEST(StepAllocations, TrieStepsAllocateNothing) {
  la::StrategyOptions o;
  o.name = "trie";
  expect_no_allocation(o);
}

TEST(StepAllocations, PromptLookupStepsAllocateNothing) {
  la::StrategyOptions o;
  o.name = "prompt-lookup";
  expect_no_allocation(o);
}

TEST(StepAllocations, AdaptiveStepsAllocateNothing) {
  for (const char* name : {"lade", "trie", "prompt-lookup"}) {
    la::StrategyOptions o;
    o.name = name;
    expect_no_allocation(o, /*adaptive=*/true);
  }
}

// One request whose plans grow mid-request (a controller, or a batch's cap, first lets it draft larger at a step
// the wall clock chooses): the step runner sized its buffers and its executor's for the strategy's largest step
// when it was made, so the first larger plan allocates nothing. Here the budget is 1 for 100 tokens, then the
// largest; before the runner reserved in its constructor, the one-request path stayed clean only because a
// controller's warm-up plans the largest budget first (checked: without the reservation this test fails, and
// prompt lookup's proposal buffer grew too). Not LADE: its n-gram pool learns new n-grams when its window first
// widens, which is the pool's growth (its steady steps are checked above), not a step's buffers. The same over
// lookahead parallelism (one request on a ParallelExecutor over 2 in-process replicas): its reserve_step sizes the
// partitioner, the parts, the replies, the merge and each replica's step buffers.
TEST(StepAllocations, AOneRequestsFirstLargerPlanAllocatesNothing) {
  for (const int ranks : {1, 2})  // a LocalExecutor; a ParallelExecutor over an in-process group of 2 replicas
  for (const char* name : {"trie", "prompt-lookup"}) {
    la::StrategyOptions o;
    o.name = name;
    auto s = la::make_strategy(o);
    const V cycle = {3, 4, 3, 5, 6, 7, 8, 9, 10, 11};
    la::test::OracleModel m(16, 1024, la::test::cycle_rule(cycle));
    pause_counting_in_forward(m);
    std::unique_ptr<la::InProcessGroup> group;
    std::unique_ptr<la::StepExecutor> ex;
    if (ranks == 1) {
      ex = std::make_unique<la::LocalExecutor>(m);
    } else {
      group = std::make_unique<la::InProcessGroup>(m, ranks);
      ex = std::make_unique<la::ParallelExecutor>(*group);
    }
    la::StepRunner runner(*ex, *s, m.config());
    V prompt = {1};
    for (int i = 0; i < 3; ++i) prompt.insert(prompt.end(), cycle.begin(), cycle.end());
    runner.begin(prompt, la::SampleParams{}, la::StepLimits{m.config().max_positions, 300, true, nullptr});
    s->set_draft_budget(1);  // after begin: without a controller, begin restores the fixed parameters
    while (runner.generated() < 100) runner.step();
    s->set_draft_budget(s->max_draft_budget());
    int largest = 0;  // the most tokens one counted step made
    g_allocs = 0;
    g_counting = true;
    for (int k = 0; k < 4; ++k) largest = std::max(largest, runner.step());
    g_counting = false;
    EXPECT_GT(largest, 2) << name << ": the larger plans must have been accepted for this test to mean anything";
    EXPECT_EQ(g_allocs, 0) << name << " on " << ranks << " rank(s): the first steps at budget " << s->max_draft_budget();
    runner.end();
  }
}

// Batched steps (BatchRunner over oracle replicas, 4 requests in flight): as for one request above, the steps
// between 150 and 350 generated tokens of every request in flight allocate nothing (a young request grows its
// prompt-lookup index and its statistics, as it does alone), fixed and adaptive (one cost model, a controller per
// slot); then 4 more requests reuse the slots and their steady steps allocate nothing either. The same with the
// slots over an in-process group of 2 replicas (lookahead parallelism: partition, parts, merge, commits per slot).
TEST(StepAllocations, BatchedStepsAllocateNothing) {
  const V cycle = {3, 4, 3, 5, 6, 7, 8, 9, 10, 11};
  for (bool lp : {false, true})
  for (const char* name : {"lade", "trie", "prompt-lookup"})  // the strategies the one-request tests cover
    for (bool adaptive : {false, true}) {
      la::test::OracleModel m(16, 1024, la::test::cycle_rule(cycle));
      pause_counting_in_forward(m);
      la::StrategyOptions o;
      o.name = name;
      auto s = la::make_strategy(o);
      la::StepCostModel cost(la::ForwardCostModel(256, 1e-3));
      cost.freeze();  // as above: choices independent of timings (a lade slot woken from a timing-driven sleep
      la::AdaptiveOptions ao;  // mid-request learns new n-grams from its stale window: pool growth, not a step leak)
      ao.host_overhead = false;
      la::BatchOptions bo;
      bo.slots = 4;
      bo.prefill_chunk = 8;
      // With the batch's draft cap (draft_cap.h, the default): it chooses on the wall clock, so the step at which a
      // slot first plans a larger draft follows the timings; every buffer a step fills (plan, input, results,
      // verdict, the controller's scratch, the trie's retrieval) is sized for the largest plan when the slot
      // opens, so that step allocates nothing either (the CI run of 8258f2a saw 26 allocations of such first
      // growth inside the counted steps, before they were). Over a replica group too: the partitioner, the parts,
      // the replies and merge (reserve_steps) and each replica's step buffers (begin_slot); before them, 87
      // allocations at a trie slot's first larger plan in 1 of 6 runs (AReplicaGroupsFirstLargestPlan... below
      // checks it deterministically).
      bo.draft_cap = true;
      std::function<std::unique_ptr<la::DraftController>(la::Strategy&)> make;
      if (adaptive) make = [&cost, ao](la::Strategy& st) { return std::make_unique<la::DraftController>(st, cost, ao); };
      la::InProcessGroup group(m, 2);
      la::ParallelExecutor par(group);
      la::BatchRunner br(m, *s, m.config(), bo, adaptive ? &cost : nullptr, make, lp ? &par : nullptr);
      const std::string label = std::string(name) + (adaptive ? " (adaptive)" : "") + (lp ? " over 2 replicas" : "");
      for (int round = 0; round < 2; ++round) {
        for (int r = 0; r < 4; ++r) {  // four requests of 400 tokens, prompts of different lengths
          V prompt = {1};
          for (int i = 0; i < 3 + r; ++i) prompt.insert(prompt.end(), cycle.begin(), cycle.end());
          la::SampleParams sp;
          sp.stream = uint64_t(4 * round + r);
          br.add(4 * round + r, prompt, sp, la::StepLimits{1024, 400, true});
        }
        long allocs = 0;
        int counted = 0, tokens = 0, drafted = 0;
        while (br.active() > 0) {
          int lo = 1 << 30, hi = 0;
          for (int slot = 0; slot < br.slots(); ++slot)
            if (br.busy(slot)) lo = std::min(lo, br.runner(slot).generated()), hi = std::max(hi, br.runner(slot).generated());
          const bool count = lo >= 150 && hi < 350;
          g_allocs = 0;
          g_counting = count;
          br.step();
          g_counting = false;
          if (count) allocs += g_allocs, ++counted;
          for (int slot : br.finished()) {
            drafted += br.runner(slot).stats().draft_tokens > 0;
            tokens += br.runner(slot).generated();
            br.release(slot);
          }
        }
        EXPECT_EQ(tokens, 4 * 400) << label;
        EXPECT_GT(counted, 5) << label;
        EXPECT_EQ(drafted, 4) << label << ": the requests must draft for this test to mean anything";
        int64_t capped = 0;
        for (int64_t n : br.counters().cap_steps) capped += n;
        EXPECT_EQ(capped > 0, adaptive) << label << ": the batch's draft cap must run with adaptive drafting";
        EXPECT_EQ(allocs, 0) << label << " round " << round << ": " << allocs << " allocations in " << counted
                             << " batched steps";
        std::printf("batched %s, round %d: %ld allocations in %d steps\n", label.c_str(), round, allocs, counted);
      }
    }
}

// Over a replica group (lookahead parallelism, in process), the first step whose plans are the largest the batch
// was sized for allocates nothing: reserve_steps() sized the partitioner, every slot's parts and merge, the
// replies, and begin_slot each replica's step buffers (a batch's draft cap lets a slot first draft larger at a
// step the wall clock chooses). Without the reservation this step allocates (checked: the test fails).
TEST(StepAllocations, AReplicaGroupsFirstLargestPlanAllocatesNothing) {
  const V cycle = {3, 4, 3, 5, 6, 7, 8, 9, 10, 11};
  la::test::OracleModel m(16, 1024, la::test::cycle_rule(cycle));
  pause_counting_in_forward(m);
  la::InProcessGroup group(m, 2);
  la::ParallelExecutor par(group);
  constexpr int kNodes = 41;  // root + 4 branches of 10
  par.reserve_steps(2, kNodes);
  std::vector<V> seqs(2);
  for (int slot = 0; slot < 2; ++slot) {
    seqs[slot] = {1};
    for (int i = 0; i < 2 + slot; ++i) seqs[slot].insert(seqs[slot].end(), cycle.begin(), cycle.end());
    par.begin_slot(slot, seqs[slot], la::SampleParams{}, 256);
    par.stage_chunk(slot, seqs[slot], 64);
  }
  par.run_staged();
  la::StepPlan plan;  // the caller's buffers, sized here (the step runner's are by reserve_step)
  plan.reserve(kNodes);
  V results, root{0};
  results.reserve(kNodes);
  for (auto& q : seqs) q.reserve(q.size() + 8);
  auto step = [&](int branches) {
    for (int slot = 0; slot < 2; ++slot) {
      plan.reset(seqs[slot].back());
      for (int b = 0; b < branches; ++b)
        for (int d = 0; d < 10; ++d) plan.add(cycle[(b + d) % cycle.size()], d == 0 ? 0 : plan.size() - 1, true);
      par.stage_plan(slot, seqs[slot], plan);
    }
    par.run_staged();
    for (int slot = 0; slot < 2; ++slot) {
      par.collect_slot(slot, results);
      seqs[slot].push_back(results[0]);
      par.commit_slot(slot, seqs[slot], root);
    }
  };
  step(0);  // a plain step first: what does not grow with the plan is in place
  g_allocs = 0;
  g_counting = true;
  step(4);
  g_counting = false;
  EXPECT_EQ(g_allocs, 0) << "the first step of " << kNodes << "-node plans over 2 replicas";
  for (int slot = 0; slot < 2; ++slot) par.end_slot(slot);
}

// The CPU forward (src/backend/cpu) on random weights with 2 pool threads: once its buffers have grown to the largest step,
// steps of every size (chains and trees, fp32 and bf16), argmax and commits allocate nothing on any thread.
TEST(StepAllocations, CpuForwardStepsAllocateNothing) {
  for (la::WType type : {la::WType::F32, la::WType::BF16}) {
    la::ModelConfig cfg;
    cfg.hidden = 64;
    cfg.intermediate = 96;
    cfg.layers = 2;
    cfg.heads = 4;
    cfg.kv_heads = 2;
    cfg.head_dim = 16;
    cfg.vocab = 101;
    cfg.max_positions = 512;
    const int es = la::wtype_size(type), H = cfg.hidden, D = cfg.head_dim;
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(-0.2f, 0.2f);
    std::vector<std::vector<uint8_t>> store;
    auto tensor = [&](long n, float base) {
      store.emplace_back(size_t(n) * es);
      for (long i = 0; i < n; ++i) la::store_from_f32(store.back().data(), type, i, base + u(rng));
      return static_cast<const void*>(store.back().data());
    };
    auto packed = [&](int N, int K) { return la::pack_weight(la::WeightView{tensor(long(N) * K, 0.f), type, N, K}); };
    la::CpuModelView v;
    v.type = type;
    v.embed = tensor(long(cfg.vocab) * H, 0.f);
    v.norm = tensor(H, 1.f);
    v.lm_head = packed(cfg.vocab, H);
    const int Q = cfg.heads * D, KV = cfg.kv_heads * D;
    for (int l = 0; l < cfg.layers; ++l) {
      la::CpuLayerView L;
      L.wqkv = packed(Q + 2 * KV, H);
      L.wo = packed(H, Q);
      L.wgu = packed(2 * cfg.intermediate, H);
      L.wd = packed(H, cfg.intermediate);
      L.ln1 = tensor(H, 1.f);
      L.ln2 = tensor(H, 1.f);
      v.layers.push_back(L);
    }
    std::vector<float> cosv(size_t(cfg.max_positions) * D), sinv(cosv.size());
    for (int p = 0; p < cfg.max_positions; ++p)
      for (int d = 0; d < D; ++d) {
        const double a = p * std::pow(10000.0, -double(2 * (d % (D / 2))) / D);
        cosv[size_t(p) * D + d] = float(std::cos(a));
        sinv[size_t(p) * D + d] = float(std::sin(a));
      }
    v.rope_cos = cosv.data();
    v.rope_sin = sinv.data();
    const int cap = 400;
    std::vector<std::vector<uint8_t>> kc(cfg.layers, std::vector<uint8_t>(size_t(cap) * KV * es)), vc = kc;
    std::vector<void*> kp, vp;
    for (int l = 0; l < cfg.layers; ++l) {
      kp.push_back(kc[l].data());
      vp.push_back(vc[l].data());
    }
    la::CpuForward f(cfg, v, std::make_shared<la::ThreadPool>(2));
    f.set_cache(kp, vp, cap);
    // Steps: a chain of 40 (the largest), then trees and single tokens; inputs and outputs made before counting.
    auto step = [&](int T, bool tree, int L) {
      la::StepInput in;
      for (int i = 0; i < T; ++i) {
        in.tokens.push_back(int32_t(rng() % cfg.vocab));
        const int parent = i == 0 ? -1 : tree ? int(rng() % i) : i - 1;
        in.parents.push_back(parent);
        in.positions.push_back(parent < 0 ? L : in.positions[parent] + 1);
      }
      return in;
    };
    std::vector<la::StepInput> steps;
    for (int T : {40, 1, 7, 32, 3, 1, 16}) steps.push_back(step(T, T % 2 == 1, 0));
    std::vector<int32_t> ids(64), commit{0, 2};
    int L = 0;
    f.run(steps[0], L, 0);  // warm-up: buffers grow to 40 rows and the longest key list
    L += 40;
    g_allocs_all = 0;
    g_counting_all = true;
    for (size_t i = 1; i < steps.size(); ++i) {
      for (auto& p : steps[i].positions) p += L;
      const int T = int(steps[i].tokens.size());
      f.run(steps[i], L, int(i % 3) * T / 2);  // every row's logits, the second half's, none (a prompt chunk)
      f.argmax(T, ids.data());
      if (T >= 3) {
        f.commit_rows(commit, L);
        L += 2;
      } else {
        L += 1;
      }
    }
    g_counting_all = false;
    EXPECT_EQ(g_allocs_all.load(), 0) << (type == la::WType::F32 ? "fp32" : "bf16");
    // The logits buffer follows the output rows, not the step's: a 40-row prompt chunk holds none (on Gemma-3's
    // 262k vocabulary a 400-row chunk held 420 MB of logits no row wrote), a 3-output step three.
    la::CpuForward g(cfg, v, std::make_shared<la::ThreadPool>(2));
    g.set_cache(kp, vp, cap);
    auto chunk = step(40, false, 0);
    g.run(chunk, 0, 40);
    EXPECT_EQ(g.logits_rows(), 0u);
    auto tree = step(7, true, 40);
    g.run(tree, 40, 4);
    EXPECT_EQ(g.logits_rows(), 3u);
    g.argmax(7, ids.data());
    EXPECT_EQ(ids[3], -1);
    EXPECT_GE(ids[4], 0);
  }
}
