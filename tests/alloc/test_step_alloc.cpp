// No allocation per step: generation through the real Generator (StepRunner, LocalExecutor) over an oracle model
// (oracle_model.h), with the global operator new replaced by one that counts while a step runs. After warm-up
// (buffers at their largest, the pool or trie holding every n-gram or branch of the oracle's cycle) a step must
// not allocate: a per-step copy of the sequence, a fresh result vector or an allocating pool lookup fails this.
// The oracle's own forward is not counted (a real forward allocates tensors; it is the model's business). Its own
// binary, because it replaces operator new; not built under the sanitizers, which replace it themselves.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "lookahead/decode/executor.h"
#include "lookahead/decode/generator.h"
#include "lookahead/decode/strategies.h"
#include "oracle_model.h"

namespace {
thread_local bool g_counting = false;
thread_local long g_allocs = 0;

void* counted_alloc(std::size_t n) {
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
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  if (g_counting) ++g_allocs;
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using V = std::vector<int32_t>;

namespace {

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
  bool paused_counting = false;
  m.set_scope([&](bool in_forward) {
    if (in_forward) { paused_counting = g_counting; g_counting = false; }
    else g_counting = paused_counting;
  });
  la::LocalExecutor ex(m);
  la::Generator g(ex, s, m.config());
  la::StepCostModel cost(la::ForwardCostModel(256, 1e-3));
  la::DraftController controller(s, cost);
  if (adaptive) {
    ex.set_cost_model(&cost);
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
