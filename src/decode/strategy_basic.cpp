// Plain autoregressive decoding and Jacobi decoding.
#include <random>

#include "lookahead/decode/strategies.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

class ArStrategy final : public Strategy {
 public:
  std::string name() const override { return ar_strategy_info().name; }
  std::unique_ptr<Strategy> spawn(int) override { return std::make_unique<ArStrategy>(); }
  void plan(const std::vector<int32_t>& seq, int, StepPlan& out) override { out.reset(seq.back()); }
  void update(const std::vector<int32_t>&, const StepPlan&, const std::vector<int32_t>&, const Verdict&) override {}
};

// Jacobi decoding: a block of k guessed future tokens is refined by fixed-point iteration. Each step feeds the
// root and the guesses as one chain; the accepted prefix is where guess i equals the model's output after
// guess i-1; the next guesses are the outputs after the accepted point (padded with prompt tokens).
class JacobiStrategy final : public Strategy {
 public:
  explicit JacobiStrategy(const StrategyOptions& o) : JacobiStrategy(o.jacobi.block, o.seed) {}
  JacobiStrategy(int k, uint64_t seed) : k_(k), seed_(seed), rng_(seed) {}
  std::string name() const override { return jacobi_strategy_info().name; }
  std::unique_ptr<Strategy> spawn(int slot) override { return std::make_unique<JacobiStrategy>(k_, seed_ + slot); }
  void begin_request(const std::vector<int32_t>& prompt) override {
    prompt_ = prompt;
    guess_.clear();
    pad();
  }
  void plan(const std::vector<int32_t>& seq, int max_depth, StepPlan& out) override {
    out.reset(seq.back());
    const int n = std::min(budget_or(k_), max_depth);
    int parent = 0;
    for (int i = 0; i < n; ++i) parent = out.add(guess_[i], parent, true);
  }
  void update(const std::vector<int32_t>&, const StepPlan& plan, const std::vector<int32_t>& results,
              const Verdict& v) override {
    // Guess i is for position root+1+i, results[i] the model's token for that position. New guess j (position
    // new root+1+j, i.e. old index m+1+j) is the model's output where one was computed, else the old guess (a
    // budget below the block keeps the unplanned guesses: the Jacobi state survives a shrinking draft).
    const int m = static_cast<int>(v.path.size()) - 1;  // accepted guesses
    const int n = plan.size() - 1;                       // guesses planned
    next_.clear();
    for (int i = m + 1; i < k_ + m + 1; ++i) {
      if (i <= n) next_.push_back(results[i]);
      else if (i < static_cast<int>(guess_.size())) next_.push_back(guess_[i]);
      else break;
    }
    guess_.swap(next_);
    pad();
  }
  int max_draft_budget() const override { return k_; }

 private:
  void pad() {
    std::uniform_int_distribution<size_t> d(0, prompt_.size() - 1);
    while (static_cast<int>(guess_.size()) < k_) guess_.push_back(prompt_[d(rng_)]);
  }
  int k_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<int32_t> prompt_, guess_, next_;
};

}  // namespace

std::unique_ptr<Strategy> make_ar_strategy() { return std::make_unique<ArStrategy>(); }
std::unique_ptr<Strategy> make_jacobi_strategy(const StrategyOptions& o) {
  validate_jacobi_options(o);
  return std::make_unique<JacobiStrategy>(o);
}

// Plain decoding has no options of its own.
void validate_ar_options(const StrategyOptions&) {}

void add_jacobi_flags(StrategyFlags& f, StrategyOptions& o) {
  f.add("jacobi-block", &o.jacobi.block, "jacobi: guessed future tokens per step");
}

void validate_jacobi_options(const StrategyOptions& o) {
  LA_CHECK(o.jacobi.block >= 0 && o.jacobi.block <= 512, "--jacobi-block must be in [0, 512] (got ", o.jacobi.block,
           ")");
}

namespace {
std::unique_ptr<Strategy> make_ar(const StrategyOptions&, StepModel*) { return make_ar_strategy(); }
std::unique_ptr<Strategy> make_jacobi(const StrategyOptions& o, StepModel*) { return make_jacobi_strategy(o); }
void no_flags(StrategyFlags&, StrategyOptions&) {}
}  // namespace

const StrategyInfo& ar_strategy_info() {
  static const StrategyInfo row{"ar", "plain decoding: one token per forward (the baseline)", no_flags,
                                validate_ar_options, make_ar};
  return row;
}

const StrategyInfo& jacobi_strategy_info() {
  static const StrategyInfo row{"jacobi", "Jacobi decoding: a block of guesses refined by fixed-point iteration",
                                add_jacobi_flags, validate_jacobi_options, make_jacobi};
  return row;
}

}  // namespace la
