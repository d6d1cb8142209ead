// Lookahead decoding (LADE, Fu et al. 2024): a 2D Jacobi window of N-1 levels x W columns and an n-gram pool,
// lookahead branch and verification branch in one forward.
//
// The plan for W = 4, N = 4 (levels 0..2), G = 2, after warm-up. Nodes are named by level (a, b, c) or
// candidate (v, w) and numbered by plan index; every window node is a lookahead node (verify 0):
//
//                  column 1     column 2     column 3     column 4
//   root r0
//   level 0        a1 --------- a2 --------- a3 --------- a4       a chain off the root: a_j at depth j
//                  |            |            |            |
//   level 1        b5           b6           b7           b8       b_j hangs off a_j: depth j+1
//                  |            |            |            |
//   level 2        c9           c10          c11          c12      c_j hangs off b_j: depth j+2
//
//   n-grams        r0 - v13 - v14 - v15                            the pool's n-grams keyed by r (at most G),
//                  r0 - w16 - w17 - w18                            chains off the root, draft 1
//
// So token (l, j) attends to the cache, the root, level 0 of columns 1..j and levels 1..l of column j: LADE's
// lookahead mask. The outputs of the top level (c) form the next level: column j yields the n-gram
// (a_j, b_j, c_j, out(c_j)) of N consecutive positions, keyed by a_j, into the pool, and the window shifts up
// (a <- b, b <- c, c <- out(c)). The verifier only follows draft nodes: at most one n-gram is accepted, N-1
// drafts plus the model's next token. The first N-2 steps of a request fill levels 1..N-2 (warm-up).
//
// What the partitioner (parallel/partition.cpp) cuts from this plan: every part holds the root and whole
// root-to-node paths, so a column travels with the level-0 prefix it hangs from (measured, partition_plan):
//   K = 2:  part 0  r  a1 a2 a3 a4  b6 b7 b8  c10 c11 c12          (columns 2-4 with the whole chain)
//           part 1  r  a1 b5 c9  v13 v14 v15  w16 w17 w18          (column 1, the n-grams)
//   K = 3:  part 0  r  a1 a2 a3 a4  b7 b8  c11 c12                 part 1  r  a1 a2  b5 b6  c9 c10
//           part 2  r  v13 v14 v15  w16 w17 w18
// In tokens, the step is the pending chain, then the plan in index order (StepInput of LocalExecutor::run).
#include <algorithm>
#include <memory>
#include <random>

#include "lookahead/decode/strategies.h"
#include "lookahead/draft/ngram_pool.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

class LadeStrategy final : public Strategy {
 public:
  explicit LadeStrategy(const StrategyOptions& o)
      : LadeStrategy(o.lade, o.seed) {}
  LadeStrategy(const LadeOptions& l, uint64_t seed, std::shared_ptr<NgramPool> shared = nullptr)
      : opt_(l), seed_(seed), W_(l.window), N_(l.ngram), G_(l.guesses), from_prompt_(l.pool_from_prompt), rng_(seed),
        shared_(shared ? std::move(shared) : std::make_shared<NgramPool>(l.ngram, l.guesses)), pool_(*shared_),
        window_(static_cast<size_t>(l.ngram - 1) * l.window, 0),
        idx_(static_cast<size_t>(l.ngram - 1) * l.window, -1), cands_(static_cast<size_t>(l.guesses) * (l.ngram - 1)),
        gram_(l.ngram) {}
  std::string name() const override { return lade_strategy_info().name; }
  // A request of the batch: its own window, the one n-gram pool.
  std::unique_ptr<Strategy> spawn(int slot) override {
    return std::make_unique<LadeStrategy>(opt_, seed_ + 0x9E3779B97F4A7C15ULL * uint64_t(slot), shared_);
  }

  void begin_request(const std::vector<int32_t>& prompt) override {
    std::uniform_int_distribution<size_t> d(0, prompt.size() - 1);
    for (int j = 0; j < W_; ++j) lv(0, j) = prompt[d(rng_)];
    levels_ = 1;
    if (from_prompt_) pool_.insert_sequence(prompt);
  }

  void plan(const std::vector<int32_t>& seq, int max_depth, StepPlan& out) override {
    out.reset(seq.back());
    const int levels = levels_;
    const int budget = budget_or(G_ * (N_ - 1));
    const int cols = draft_budget() < 0 ? W_ : window_columns(budget);
    idx_.assign(static_cast<size_t>(N_ - 1) * W_, -1);  // sized once: assign() keeps the capacity
    // level 0: chain (columns 0..cols-1; the columns beyond keep their state for when the window grows again)
    int parent = 0;
    for (int j = 0; j < cols && j + 1 <= max_depth; ++j) {
      parent = out.add(lv(0, j), parent, false);
      node(0, j) = parent;
    }
    for (int l = 1; l < levels; ++l)
      for (int j = 0; j < cols; ++j) {
        if (node(l - 1, j) < 0 || j + 1 + l > max_depth) continue;
        node(l, j) = out.add(lv(l, j), node(l - 1, j), false);
      }
    // verification candidates: the first `budget` draft nodes of the pool's candidates, in the pool's order
    if (G_ > 0 && budget > 0) {
      int left = budget;
      cands_.clear();
      const int count = pool_.lookup_into(seq.back(), G_, cands_);
      for (int c = 0; c < count && left > 0; ++c) {
        const int32_t* cand = cands_.data() + static_cast<size_t>(c) * (N_ - 1);
        int p = 0;
        for (int i = 0; i < N_ - 1 && i + 1 <= max_depth && left > 0; ++i, --left) p = out.add(cand[i], p, true);
      }
    }
  }

  // A column computed this step (its top level ran) advances: with a full window it yields the n-gram
  // (level0..top, fresh) and shifts up by one level. Columns not computed (a smaller window, or cut by the context
  // limit) keep their Jacobi state unchanged, so a window that shrinks and grows again resumes where it was.
  void update(const std::vector<int32_t>&, const StepPlan&, const std::vector<int32_t>& results,
              const Verdict&) override {
    const int top = levels_ - 1;
    if (levels_ < N_ - 1) {  // warm-up: fill the next level (columns not run repeat their top)
      for (int j = 0; j < W_; ++j) lv(top + 1, j) = node(top, j) >= 0 ? results[node(top, j)] : lv(top, j);
      ++levels_;
      return;
    }
    gram_.resize(N_);
    for (int j = 0; j < W_; ++j) {
      if (node(top, j) < 0) continue;
      const int32_t fresh = results[node(top, j)];
      for (int l = 0; l < N_ - 1; ++l) gram_[l] = lv(l, j);
      gram_[N_ - 1] = fresh;
      pool_.insert(gram_.data());
      for (int l = 0; l < top; ++l) lv(l, j) = lv(l + 1, j);
      lv(top, j) = fresh;
    }
  }

  // Another group's request (--lp-size): every n-gram ending at an output token goes into the pool, the n-grams
  // this strategy's window would have harvested had it decoded the request (update() inserts them as they appear).
  // The request in flight keeps its window.
  void learn(const std::vector<int32_t>& seq, size_t prompt_len) override {
    const size_t n = static_cast<size_t>(N_);
    if (seq.size() <= prompt_len || seq.size() < n) return;
    for (size_t s = prompt_len + 1 >= n ? prompt_len + 1 - n : 0; s + n <= seq.size(); ++s) pool_.insert(&seq[s]);
    ++learned_;
  }

  // Budget = verification tokens (G' n-grams of N-1 tokens); the window is sized with it, W' = ceil(W b / (G(N-1)))
  // columns (at least one while drafting, none for a plain step): the window feeds the pool the candidates come
  // from, so it shrinks and grows with them, in the fixed W:G proportion of the upper bounds.
  int max_draft_budget() const override { return G_ * (N_ - 1); }
  std::vector<int> draft_ladder() const override { return geometric_ladder(max_draft_budget(), N_ - 1); }
  // Context: n-grams the pool holds for the root (0, 1, 2, 3+): none means only the window would run.
  int draft_contexts() const override { return 4; }
  int draft_context(const std::vector<int32_t>& seq, int) override {
    if (G_ <= 0 || seq.empty()) return 0;
    cands_.clear();
    return std::min(3, pool_.lookup_into(seq.back(), std::min(G_, 3), cands_));
  }
  std::string draft_context_label(int c) const override {
    return std::to_string(c) + (c == 3 ? "+" : "") + " pool n-grams";
  }
  int lookahead_nodes(int budget) const override {
    return window_columns(std::min(budget, max_draft_budget())) * (N_ - 1);  // levels once warmed up
  }

  std::map<std::string, double> counters() const override {
    return {{"pool_ngrams", double(pool_.size())}, {"pool_keys", double(pool_.keys())},
            {"lade_learned_requests", double(learned_)}};
  }

 private:
  LadeOptions opt_;
  uint64_t seed_;
  int W_, N_, G_;
  bool from_prompt_;
  std::mt19937_64 rng_;
  std::shared_ptr<NgramPool> shared_;  // the pool, shared with the strategies spawned for a batch
  NgramPool& pool_;
  // The window, flat and sized once: level l of column j at [l * W + j] (window_), its plan node in the current
  // plan or -1 (idx_); levels_ levels are filled (N-1 after warm-up).
  std::vector<int32_t> window_, idx_;
  int levels_ = 0;
  uint64_t learned_ = 0;  // other groups' requests added by learn()
  std::vector<int32_t> cands_, gram_;  // pool candidates (flat, N-1 tokens each) and the n-gram harvested

  int32_t& lv(int l, int j) { return window_[static_cast<size_t>(l) * W_ + j]; }
  int32_t& node(int l, int j) { return idx_[static_cast<size_t>(l) * W_ + j]; }

  int window_columns(int budget) const {
    if (budget <= 0 || G_ <= 0) return 0;
    const int full = G_ * (N_ - 1);
    return std::clamp((W_ * budget + full - 1) / full, 1, W_);
  }
};

}  // namespace

std::unique_ptr<Strategy> make_lade_strategy(const StrategyOptions& o) {
  validate_lade_options(o);
  return std::make_unique<LadeStrategy>(o);
}

// LADE's sizes, under their own flag names wherever they are used (--window for lade, --draft-window for the
// draft model of Ouroboros): one check and one set of help lines for both.
void add_lade_size_flags(StrategyFlags& f, LadeOptions& l, const std::string& prefix, const std::string& who) {
  f.add(prefix + "window", &l.window, who + ": window W (lookahead columns)");
  f.add(prefix + "ngram", &l.ngram, who + ": n-gram size N (N-1 window levels)");
  f.add(prefix + "guesses", &l.guesses, who + ": G, max verification n-grams per step and per key");
}

void validate_lade_sizes(const LadeOptions& l, const std::string& p) {
  LA_CHECK(l.window >= 1 && l.window <= 256, "--", p, "window must be in [1, 256] (got ", l.window, ")");
  LA_CHECK(l.ngram >= 2 && l.ngram <= 32, "--", p, "ngram must be in [2, 32] (got ", l.ngram, ")");
  LA_CHECK(l.guesses >= 0 && l.guesses <= 256, "--", p, "guesses must be in [0, 256] (got ", l.guesses, ")");
}

void add_lade_flags(StrategyFlags& f, StrategyOptions& o) {
  add_lade_size_flags(f, o.lade, "", "lade");
  f.add_switch("pool-from-prompt", &o.lade.pool_from_prompt, "lade: seed the n-gram pool with prompt n-grams");
}

void validate_lade_options(const StrategyOptions& o) {
  validate_lade_sizes(o.lade, "");
}

const StrategyInfo& lade_strategy_info() {
  static const StrategyInfo row{"lade", "lookahead decoding: a 2D Jacobi window and an n-gram pool", add_lade_flags,
                                validate_lade_options,
                                [](const StrategyOptions& o, StepModel*) { return make_lade_strategy(o); }};
  return row;
}

}  // namespace la
