// No allocation per step: generation through the real Generator (StepRunner, LocalExecutor) over an oracle model
// (oracle_model.h), with the global operator new replaced by one that counts while a step runs. After warm-up
// (buffers at their largest, the pool or trie holding every n-gram or branch of the oracle's cycle) a step must
// not allocate: a per-step copy of the sequence, a fresh result vector or an allocating pool lookup fails this.
// The oracle's own forward is not counted (a real forward allocates tensors; it is the model's business). Its own
// binary, because it replaces operator new; not built under the sanitizers, which replace it themselves.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
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
#include "lookahead/dist/comm_group.h"
#include "lookahead/dist/worker.h"
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

namespace {

// Round `round` of a batched test: four requests of 400 tokens on the cycle, prompts of different lengths.
void add_four_requests(la::BatchRunner& br, const V& cycle, int round) {
  for (int r = 0; r < 4; ++r) {
    V prompt = {1};
    for (int i = 0; i < 3 + r; ++i) prompt.insert(prompt.end(), cycle.begin(), cycle.end());
    la::SampleParams sp;
    sp.stream = uint64_t(4 * round + r);
    br.add(4 * round + r, prompt, sp, la::StepLimits{1024, 400, true});
  }
}

// Whether every request in flight has generated between 150 and 350 tokens (its steady steps: counted).
bool steady(la::BatchRunner& br) {
  int lo = 1 << 30, hi = 0;
  for (int slot = 0; slot < br.slots(); ++slot)
    if (br.busy(slot)) lo = std::min(lo, br.runner(slot).generated()), hi = std::max(hi, br.runner(slot).generated());
  return lo >= 150 && hi < 350;
}

}  // namespace

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
        add_four_requests(br, cycle, round);
        long allocs = 0;
        int counted = 0, tokens = 0, drafted = 0;
        while (br.active() > 0) {
          const bool count = steady(br);
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

// ---- Lookahead parallelism over a comm group (src/dist: the group rank 0 drives, the workers' loop, the
// protocol's buffers): its ranks as threads of this process, over a Comm whose mailboxes reuse their buffers.
// A worker thread's allocations count while it serves a message rank 0 sent from a counted step (the flag travels
// with the message) and are added up when it replies.
namespace {

std::atomic<long> g_worker_allocs{0};

// Rank 0 and K - 1 worker threads: rank 0 -> rank r through down[r], rank r -> rank 0 through up[r].
struct ThreadHub {
  struct Box {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int32_t> data;
    bool full = false, counted = false;
  };
  explicit ThreadHub(int k) : down(k), up(k) {
    for (int r = 0; r < k; ++r) down[r].data.reserve(1 << 16), up[r].data.reserve(1 << 16);  // not the engine's
  }
  static void put(Box& b, const std::vector<int32_t>& v, bool counted) {
    std::unique_lock<std::mutex> l(b.mu);
    b.cv.wait(l, [&] { return !b.full; });
    b.data.assign(v.begin(), v.end());
    b.full = true;
    b.counted = counted;
    b.cv.notify_all();
  }
  // Into `out` (the engine's buffer: its growth counts). A worker counts while it serves a counted message.
  static bool take(Box& b, std::vector<int32_t>& out, bool worker) {
    std::unique_lock<std::mutex> l(b.mu);
    if (!b.cv.wait_for(l, std::chrono::seconds(60), [&] { return b.full; }))
      throw la::Error("thread comm: no message within 60 s");
    if (worker) g_counting = b.counted;
    out.assign(b.data.begin(), b.data.end());
    b.full = false;
    b.cv.notify_all();
    return b.counted;
  }
  std::vector<Box> down, up;
};

class ThreadComm final : public la::Comm {
 public:
  ThreadComm(ThreadHub& hub, int rank, bool nccl) : hub_(hub), rank_(rank), nccl_(nccl) {}
  std::string backend() const override { return nccl_ ? "nccl" : "mpi"; }  // "nccl": one message for all parts
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(hub_.down.size()); }
  int local_rank() const override { return rank_; }
  int local_size() const override { return size(); }
  std::string host() const override { return "threads"; }
  void send(int, int, const std::vector<int32_t>&) override { throw la::Error("thread comm: no send"); }
  std::vector<int32_t> recv(int, int, double) override { throw la::Error("thread comm: no recv"); }
  void bcast(std::vector<int32_t>& v, double) override {
    if (rank_ == 0) for (int r = 1; r < size(); ++r) ThreadHub::put(hub_.down[r], v, g_counting);
    else ThreadHub::take(hub_.down[rank_], v, true);
  }
  void bcast_bytes(std::string&, double) override { throw la::Error("thread comm: no bcast_bytes"); }
  void scatter(const std::vector<std::vector<int32_t>>& msgs, std::vector<int32_t>& mine, double) override {
    if (rank_ == 0) for (int r = 1; r < size(); ++r) ThreadHub::put(hub_.down[r], msgs[r], g_counting);
    else ThreadHub::take(hub_.down[rank_], mine, true);
  }
  void gather(const std::vector<int32_t>& v, std::vector<std::vector<int32_t>>& all, double) override {
    if (rank_ != 0) {  // a worker's reply ends the work of the message it served: its count is handed over
      g_worker_allocs.fetch_add(g_allocs);
      g_allocs = 0;
      g_counting = false;
      ThreadHub::put(hub_.up[rank_], v, false);
      return;
    }
    all.resize(size());
    all[0].assign(v.begin(), v.end());
    for (int r = 1; r < size(); ++r) ThreadHub::take(hub_.up[r], all[r], false);
  }
  std::vector<uint64_t> allgather(uint64_t x) override { return std::vector<uint64_t>(size(), x); }
  void barrier() override {}
  std::unique_ptr<la::Comm> split(int, int) override { throw la::Error("thread comm: no split"); }
  bool try_recv(int, int, std::vector<int32_t>&, int*) override { return false; }

 private:
  ThreadHub& hub_;
  int rank_;
  bool nccl_;
};

// A comm group of `k` ranks over oracle replicas: rank 0's executor here, the workers on threads (each its own
// oracle and LocalExecutor, its forward not counted).
struct ThreadedGroup {
  ThreadedGroup(la::test::OracleModel& m, int k, bool nccl) : hub(k), local0(m) {
    for (int r = 0; r < k; ++r) comms.push_back(std::make_unique<ThreadComm>(hub, r, nccl));
    for (int r = 1; r < k; ++r) {
      models.push_back(m.fork());
      locals.push_back(std::make_unique<la::LocalExecutor>(*models.back()));
    }
    for (int r = 1; r < k; ++r)
      threads.emplace_back([this, r] {
        try {
          la::run_worker(*comms[r], *locals[r - 1], la::CommGroupOptions{});
        } catch (const std::exception& e) {
          std::fprintf(stderr, "worker %d: %s\n", r, e.what());
          failed = true;
        }
      });
    par = la::make_parallel_executor(*comms[0], local0, 0, la::CommGroupOptions{}, la::ParallelOptions{});
  }
  ~ThreadedGroup() {
    par->shutdown();
    for (auto& t : threads) t.join();
  }
  ThreadHub hub;
  std::vector<std::unique_ptr<ThreadComm>> comms;
  std::vector<std::unique_ptr<la::StepModel>> models;
  std::vector<std::unique_ptr<la::LocalExecutor>> locals;
  la::LocalExecutor local0;
  std::vector<std::thread> threads;
  std::unique_ptr<la::ParallelExecutor> par;
  std::atomic<bool> failed{false};
};

}  // namespace

// One request over a comm group of 2 and 3 ranks, both message shapes (a part per worker over MPI; every part in
// one broadcast over NCCL): after a plain warm-up at budget 1, the first steps at the largest budget allocate
// nothing on rank 0 or any worker (rank 0's reserve_step sized its messages and replies, and the workers' buffers
// through BEGIN's step rows), and the ids are those of plain decoding.
TEST(StepAllocations, ACommGroupsFirstLargerPlanAllocatesNothing) {
  const V cycle = {3, 4, 3, 5, 6, 7, 8, 9, 10, 11};
  for (const int ranks : {2, 3})
  for (const bool nccl : {false, true})
  for (const char* name : {"trie", "prompt-lookup"}) {
    la::StrategyOptions o;
    o.name = name;
    auto s = la::make_strategy(o);
    la::test::OracleModel m(16, 1024, la::test::cycle_rule(cycle));
    pause_counting_in_forward(m);
    ThreadedGroup tg(m, ranks, nccl);
    const std::string label = std::string(name) + " over " + std::to_string(ranks) + " ranks" + (nccl ? " (nccl)" : "");
    la::StepRunner runner(*tg.par, *s, m.config());
    V prompt = {1};
    for (int i = 0; i < 3; ++i) prompt.insert(prompt.end(), cycle.begin(), cycle.end());
    runner.begin(prompt, la::SampleParams{}, la::StepLimits{m.config().max_positions, 300, true, nullptr});
    s->set_draft_budget(1);
    while (runner.generated() < 100) runner.step();
    s->set_draft_budget(s->max_draft_budget());
    int largest = 0;
    g_allocs = 0;
    g_worker_allocs = 0;
    g_counting = true;
    for (int k = 0; k < 4; ++k) largest = std::max(largest, runner.step());
    g_counting = false;
    while (!runner.done()) runner.step();  // the rest, for the ids
    EXPECT_GT(largest, 2) << label << ": the larger plans must have been accepted for this test to mean anything";
    EXPECT_EQ(g_allocs, 0) << label << ": rank 0, the first steps at budget " << s->max_draft_budget();
    EXPECT_EQ(g_worker_allocs.load(), 0) << label << ": the workers, the first steps at budget " << s->max_draft_budget();
    const V& ids = runner.seq();
    for (size_t i = prompt.size(); i < ids.size(); ++i)
      ASSERT_EQ(ids[i], cycle[(i - 1) % cycle.size()]) << label << ": token " << i << " is not plain decoding's";
    EXPECT_EQ(static_cast<int>(ids.size() - prompt.size()), 300) << label;
    runner.end();
    EXPECT_FALSE(tg.failed) << label;
  }
}

// Batched steps over a comm group (2 ranks, both message shapes; 4 slots, two rounds of 4 requests): the steady
// steps of every request in flight allocate nothing on rank 0 or the worker, and every request's ids are plain
// decoding's.
TEST(StepAllocations, BatchedStepsOverACommGroupAllocateNothing) {
  const V cycle = {3, 4, 3, 5, 6, 7, 8, 9, 10, 11};
  for (const bool nccl : {false, true})
  for (const char* name : {"lade", "trie", "prompt-lookup"}) {
    la::test::OracleModel m(16, 1024, la::test::cycle_rule(cycle));
    pause_counting_in_forward(m);
    la::StrategyOptions o;
    o.name = name;
    auto s = la::make_strategy(o);
    la::BatchOptions bo;
    bo.slots = 4;
    bo.prefill_chunk = 8;
    ThreadedGroup tg(m, 2, nccl);
    la::BatchRunner br(m, *s, m.config(), bo, nullptr, {}, tg.par.get());
    const std::string label = std::string(name) + " over 2 ranks" + (nccl ? " (nccl)" : "");
    for (int round = 0; round < 2; ++round) {
      add_four_requests(br, cycle, round);
      long allocs = 0, worker_allocs = 0;
      int counted = 0, tokens = 0, drafted = 0;
      while (br.active() > 0) {
        const bool count = steady(br);
        g_allocs = 0;
        g_worker_allocs = 0;
        g_counting = count;
        br.step();
        g_counting = false;
        if (count) allocs += g_allocs, worker_allocs += g_worker_allocs.load(), ++counted;
        for (int slot : br.finished()) {
          la::StepRunner& run = br.runner(slot);
          drafted += run.stats().draft_tokens > 0;
          tokens += run.generated();
          const V& ids = run.seq();
          for (size_t i = ids.size() - run.generated(); i < ids.size(); ++i)
            ASSERT_EQ(ids[i], cycle[(i - 1) % cycle.size()]) << label << ": slot " << slot << " token " << i;
          br.release(slot);
        }
      }
      EXPECT_EQ(tokens, 4 * 400) << label;
      EXPECT_GT(counted, 5) << label;
      EXPECT_EQ(drafted, 4) << label << ": the requests must draft for this test to mean anything";
      EXPECT_EQ(allocs, 0) << label << " round " << round << ": rank 0, " << allocs << " allocations in " << counted
                           << " batched steps";
      EXPECT_EQ(worker_allocs, 0) << label << " round " << round << ": the worker, " << worker_allocs
                                  << " allocations in " << counted << " batched steps";
      std::printf("batched %s, round %d: %ld + %ld allocations in %d steps\n", label.c_str(), round, allocs,
                  worker_allocs, counted);
    }
    EXPECT_FALSE(tg.failed) << label;
  }
}

// Over a replica group (lookahead parallelism), the first step whose plans are the largest the batch was sized
// for allocates nothing: reserve_steps() sized the partitioner, every slot's parts and merge, the replies, and
// begin_slot each replica's step buffers (a batch's draft cap lets a slot first draft larger at a step the wall
// clock chooses). In process, and over a comm group of 2 ranks in both message shapes (rank 0's BATCH message
// and replies, the worker's message, reply and slot buffers, all sized at the slots' begin). Without the
// reservations this step allocates (checked: the test fails).
TEST(StepAllocations, AReplicaGroupsFirstLargestPlanAllocatesNothing) {
  const V cycle = {3, 4, 3, 5, 6, 7, 8, 9, 10, 11};
  for (const char* group_kind : {"in-process", "comm", "comm (nccl)"}) {
    la::test::OracleModel m(16, 1024, la::test::cycle_rule(cycle));
    pause_counting_in_forward(m);
    std::unique_ptr<la::InProcessGroup> inproc;
    std::unique_ptr<la::ParallelExecutor> inproc_par;
    std::unique_ptr<ThreadedGroup> threaded;
    if (std::string(group_kind) == "in-process") {
      inproc = std::make_unique<la::InProcessGroup>(m, 2);
      inproc_par = std::make_unique<la::ParallelExecutor>(*inproc);
    } else {
      threaded = std::make_unique<ThreadedGroup>(m, 2, std::string(group_kind) == "comm (nccl)");
    }
    la::ParallelExecutor& par = inproc_par ? *inproc_par : *threaded->par;
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
    step(0);  // (a comm group's worker applies a commit with the next round's message)
    g_allocs = 0;
    g_worker_allocs = 0;
    g_counting = true;
    step(4);
    step(4);  // the worker commits the first large parts with this round
    g_counting = false;
    EXPECT_EQ(g_allocs, 0) << group_kind << ": rank 0, the first steps of " << kNodes << "-node plans over 2 replicas";
    EXPECT_EQ(g_worker_allocs.load(), 0) << group_kind << ": the worker, the first steps of " << kNodes << "-node plans";
    for (int slot = 0; slot < 2; ++slot) par.end_slot(slot);
  }
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
