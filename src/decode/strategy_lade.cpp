// Lookahead decoding (LADE, Fu et al. 2024): a 2D Jacobi window of N-1 levels x W columns and an n-gram pool,
// lookahead branch and verification branch in one forward.
//
// Tree layout of the lookahead branch (positions follow from depth): level-0 tokens form a chain from the root
// (column j at depth j+1); level l of column j hangs off level l-1 of column j (depth j+1+l). So token (l, j)
// attends to the cache, the root, level 0 of columns 0..j and levels 1..l of column j: LADE's lookahead mask.
// The outputs of the top level form the next level; column j then yields the n-gram
// (level0[j], ..., level_{N-2}[j], new[j]) of N consecutive positions, keyed by level0[j].
// Verification branch: up to G pool n-grams that start with the root token, each as a chain of its N-1 tokens.
#include <algorithm>
#include <random>

#include "lookahead/decode/strategies.h"
#include "lookahead/draft/ngram_pool.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

class LadeStrategy final : public Strategy {
 public:
  explicit LadeStrategy(const StrategyOptions& o)
      : W_(o.window), N_(o.ngram), G_(o.guesses), from_prompt_(o.pool_from_prompt), rng_(o.seed),
        pool_(o.ngram, o.guesses) {}
  std::string name() const override { return "lade"; }

  void begin_request(const std::vector<int32_t>& prompt) override {
    levels_.clear();
    std::uniform_int_distribution<size_t> d(0, prompt.size() - 1);
    std::vector<int32_t> l0(W_);
    for (auto& t : l0) t = prompt[d(rng_)];
    levels_.push_back(std::move(l0));
    if (from_prompt_) pool_.insert_sequence(prompt);
  }

  void plan(const std::vector<int32_t>& seq, int max_depth, StepPlan& out) override {
    out.reset(seq.back());
    const int levels = static_cast<int>(levels_.size());
    const int budget = budget_or(G_ * (N_ - 1));
    const int cols = draft_budget() < 0 ? W_ : window_columns(budget);
    idx_.assign(levels, std::vector<int32_t>(W_, -1));
    // level 0: chain (columns 0..cols-1; the columns beyond keep their state for when the window grows again)
    int parent = 0;
    for (int j = 0; j < cols && j + 1 <= max_depth; ++j) {
      parent = out.add(levels_[0][j], parent, false);
      idx_[0][j] = parent;
    }
    for (int l = 1; l < levels; ++l)
      for (int j = 0; j < cols; ++j) {
        if (idx_[l - 1][j] < 0 || j + 1 + l > max_depth) continue;
        idx_[l][j] = out.add(levels_[l][j], idx_[l - 1][j], false);
      }
    // verification candidates: the first `budget` verify nodes of the pool's candidates, in the pool's order
    if (G_ > 0 && budget > 0) {
      int left = budget;
      for (const auto& cand : pool_.lookup(seq.back(), G_)) {
        int p = 0;
        for (int i = 0; i < static_cast<int>(cand.size()) && i + 1 <= max_depth && left > 0; ++i, --left)
          p = out.add(cand[i], p, true);
        if (left <= 0) break;
      }
    }
  }

  // A column computed this step (its top level ran) advances: with a full window it yields the n-gram
  // (level0..top, fresh) and shifts up by one level. Columns not computed (a smaller window, or cut by the context
  // limit) keep their Jacobi state unchanged, so a window that shrinks and grows again resumes where it was.
  void update(const std::vector<int32_t>&, const StepPlan&, const std::vector<int32_t>& results,
              const Verdict&) override {
    const int top = static_cast<int>(levels_.size()) - 1;
    fresh_.resize(W_);
    for (int j = 0; j < W_; ++j) fresh_[j] = idx_[top][j] >= 0 ? results[idx_[top][j]] : levels_[top][j];
    if (static_cast<int>(levels_.size()) < N_ - 1) {  // warm-up: fill the levels (columns not run repeat their top)
      levels_.push_back(fresh_);
      return;
    }
    std::vector<int32_t> gram(N_);
    for (int j = 0; j < W_; ++j) {
      if (idx_[top][j] < 0) continue;
      for (int l = 0; l < N_ - 1; ++l) gram[l] = levels_[l][j];
      gram[N_ - 1] = fresh_[j];
      pool_.insert(gram);
      for (int l = 0; l < top; ++l) levels_[l][j] = levels_[l + 1][j];
      levels_[top][j] = fresh_[j];
    }
  }

  // Budget = verification tokens (G' n-grams of N-1 tokens); the window is sized with it, W' = ceil(W b / (G(N-1)))
  // columns (at least one while drafting, none for a plain step): the window feeds the pool the candidates come
  // from, so it shrinks and grows with them, in the fixed W:G proportion of the upper bounds.
  int max_draft_budget() const override { return G_ * (N_ - 1); }
  std::vector<int> draft_ladder() const override { return geometric_ladder(max_draft_budget(), N_ - 1); }
  // Context: n-grams the pool holds for the root (0, 1, 2, 3+): none means only the window would run.
  int draft_contexts() const override { return 4; }
  int draft_context(const std::vector<int32_t>& seq) override {
    if (G_ <= 0 || seq.empty()) return 0;
    scratch_.clear();
    return std::min(3, pool_.lookup_into(seq.back(), std::min(G_, 3), scratch_));
  }
  int lookahead_nodes(int budget) const override {
    return window_columns(std::min(budget, max_draft_budget())) * (N_ - 1);  // levels once warmed up
  }

  std::map<std::string, double> counters() const override {
    return {{"pool_ngrams", double(pool_.size())}, {"pool_keys", double(pool_.keys())}};
  }

 private:
  int W_, N_, G_;
  bool from_prompt_;
  std::mt19937_64 rng_;
  NgramPool pool_;
  std::vector<std::vector<int32_t>> levels_;
  std::vector<std::vector<int32_t>> idx_;
  std::vector<int32_t> fresh_, scratch_;

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

void validate_lade_options(const StrategyOptions& o) {
  LA_CHECK(o.window >= 1 && o.window <= 256, "--window must be in [1, 256] (got ", o.window, ")");
  LA_CHECK(o.ngram >= 2 && o.ngram <= 32, "--ngram must be in [2, 32] (got ", o.ngram, ")");
  LA_CHECK(o.guesses >= 0 && o.guesses <= 256, "--guesses must be in [0, 256] (got ", o.guesses, ")");
}

}  // namespace la
