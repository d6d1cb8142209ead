// Plain autoregressive decoding and Jacobi decoding.
#include <random>

#include "lookahead/decode/strategies.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

class ArStrategy final : public Strategy {
 public:
  std::string name() const override { return "ar"; }
  void plan(const std::vector<int32_t>& seq, int, StepPlan& out) override { out.reset(seq.back()); }
  void update(const std::vector<int32_t>&, const StepPlan&, const std::vector<int32_t>&, const Verdict&) override {}
};

// Jacobi decoding: a block of k guessed future tokens is refined by fixed-point iteration. Each step feeds the
// root and the guesses as one chain; the accepted prefix is where guess i equals the model's output after
// guess i-1; the next guesses are the outputs after the accepted point (padded with prompt tokens).
class JacobiStrategy final : public Strategy {
 public:
  explicit JacobiStrategy(const StrategyOptions& o) : k_(o.jacobi_block), rng_(o.seed) {}
  std::string name() const override { return "jacobi"; }
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
  std::mt19937_64 rng_;
  std::vector<int32_t> prompt_, guess_, next_;
};

}  // namespace

std::unique_ptr<Strategy> make_ar_strategy() { return std::make_unique<ArStrategy>(); }
std::unique_ptr<Strategy> make_jacobi_strategy(const StrategyOptions& o) { return std::make_unique<JacobiStrategy>(o); }

void StrategyOptions::validate() const {
  static const char* kNames[] = {"ar", "jacobi", "lade", "trie", "prompt-lookup", "ouroboros"};
  bool ok = false;
  for (auto* n : kNames) ok = ok || name == n;
  LA_CHECK(ok, "invalid --strategy '", name, "' (expected ar, jacobi, lade, trie, prompt-lookup or ouroboros)");
  LA_CHECK(jacobi_block >= 0 && jacobi_block <= 512, "--jacobi-block must be in [0, 512] (got ", jacobi_block, ")");
  LA_CHECK(window >= 1 && window <= 256, "--window must be in [1, 256] (got ", window, ")");
  LA_CHECK(ngram >= 2 && ngram <= 32, "--ngram must be in [2, 32] (got ", ngram, ")");
  LA_CHECK(guesses >= 0 && guesses <= 256, "--guesses must be in [0, 256] (got ", guesses, ")");
  LA_CHECK(decoding_length >= 0 && decoding_length <= 1024, "--decoding-length must be in [0, 1024] (got ",
           decoding_length, ")");
  LA_CHECK(branch_length >= 1 && branch_length <= 256, "--branch-length must be in [1, 256] (got ", branch_length, ")");
  LA_CHECK(trie_capacity >= 0, "--trie-capacity must be >= 0 (got ", trie_capacity, ")");
  LA_CHECK(trie_mode == "hierarchical" || trie_mode == "parallel", "invalid --trie-mode '", trie_mode,
           "' (expected hierarchical or parallel)");
  LA_CHECK(pl_min_ngram >= 1 && pl_max_ngram >= pl_min_ngram && pl_max_ngram <= 64,
           "--pl-min-ngram/--pl-max-ngram must satisfy 1 <= min <= max <= 64 (got ", pl_min_ngram, ", ",
           pl_max_ngram, ")");
  LA_CHECK(pl_num_tokens >= 0 && pl_num_tokens <= 256, "--pl-num-tokens must be in [0, 256] (got ", pl_num_tokens, ")");
  LA_CHECK(gamma >= 1 && gamma <= 256, "--gamma must be in [1, 256] (got ", gamma, ")");
  LA_CHECK(draft_window >= 1 && draft_window <= 256, "--draft-window must be in [1, 256]");
  LA_CHECK(draft_ngram >= 2 && draft_ngram <= 32, "--draft-ngram must be in [2, 32]");
  LA_CHECK(draft_guesses >= 0 && draft_guesses <= 256, "--draft-guesses must be in [0, 256]");
  LA_CHECK(extensions >= 0 && extensions <= 64, "--extensions must be in [0, 64] (got ", extensions, ")");
  LA_CHECK(name != "ouroboros" || !draft_model.empty(), "--strategy ouroboros needs --draft-model");
}

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& o, StepModel* draft) {
  o.validate();
  if (o.name == "ar") return make_ar_strategy();
  if (o.name == "jacobi") return make_jacobi_strategy(o);
  if (o.name == "lade") return make_lade_strategy(o);
  if (o.name == "trie") return make_trie_strategy(o);
  if (o.name == "prompt-lookup") return make_prompt_lookup_strategy(o);
  return make_ouroboros_strategy(o, draft);
}

}  // namespace la
