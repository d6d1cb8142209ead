// SuffixDecoding-style drafting (Oliaro et al., NeurIPS'25; arctic-inference's suffix_decoding): two suffix trees
// (draft/suffix_tree.h), one over this request's prompt and output, one global over earlier outputs
// (draft/suffix_state.h: bounded in bytes, oldest outputs evicted, persisted with --suffix-state).
//
// Each step, for the context seq (root = seq.back()):
//   1. match: in each tree, the longest suffix of seq (at most depth/2 tokens) whose node has continuations;
//   2. speculation length: at most ceil(factor x match length) nodes (a long chained match drafts long, a one-token
//      match drafts little), and never more than --suffix-max-tokens;
//   3. draft tree: best first by empirical path probability (child count / sibling counts, multiplied along the
//      path), cut below --suffix-min-prob;
//   4. the tree with the higher score (sum of path probabilities = expected accepted tokens) is planned.
// Steps 1-4 never look at the budget; the plan at budget b is the first b nodes of that best-first order, the
// prefix the controller's counterfactual statistics assume (strategy.h).
//
// The plan for a match "... a b" whose continuations were "c d e" (3 times) and "c x" (once), 4 nodes:
//
//   r0(b) ─ c1 (1.0) ─ d2 (0.75) ─ e3 (0.75)
//                    └ x4 (0.25)
//
// Every node is a draft node; the verifier accepts the longest path the model agrees with. The partitioner
// (parallel/partition.cpp) splits it like the trie's plan: each part holds whole root-to-node paths, e.g. K = 2:
// part 0 = r0 c1 d2 e3, part 1 = r0 c1 x4.
//
// Learning is lazy: the request's tree indexes the sequence at its first draft, and the global tree inserts
// stored outputs when it is next matched (suffix_state.h), so requests the controller decodes plainly while the
// strategy sleeps cost a copy of their output, not 32 tree updates per token.
//
// Draft context for the controller (Strategy::draft_context): the expected accepted tokens of the draft, in
// classes 0, (0, 0.5], (0.5, 1], (1, 2], (2, 4], (4, 8], > 8, so a long confident match and a weak guess are
// judged on their own statistics; and "chain": a draft right after a step that accepted 2 or more tokens (copying
// a span accepts long runs step after step). The match length of each step is counted per class (counters).
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "lookahead/decode/state_checkpoint.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/draft/suffix_state.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

constexpr int kClasses = 8;  // 7 score classes, then "chain"

int score_class(double s) {
  if (s <= 0) return 0;
  if (s <= 0.5) return 1;
  if (s <= 1) return 2;
  if (s <= 2) return 3;
  if (s <= 4) return 4;
  if (s <= 8) return 5;
  return 6;
}

class SuffixStrategy final : public Strategy {
 public:
  // The global tree and its state file, shared by the strategies spawned for a batch.
  struct Shared {
    explicit Shared(const SuffixOptions& o)
        : global(o.depth, o.global_mb * (int64_t{1} << 20), o.vocab_size, o.model_id),
          state(o.state, !o.state_read_only) {}
    SuffixGlobal global;
    StateCheckpoint state;
    size_t loaded = 0;
  };

  SuffixStrategy(const SuffixOptions& o, std::shared_ptr<Shared> sh)
      : opt_(o), local_(o.depth), sh_(std::move(sh)), global_(sh_->global), state_(sh_->state), loaded_(sh_->loaded) {}

  explicit SuffixStrategy(const SuffixOptions& o) : SuffixStrategy(o, std::make_shared<Shared>(o)) {
    if (!opt_.state.empty()) {
      std::error_code ec;
      if (std::filesystem::exists(opt_.state, ec)) {
        global_.load(opt_.state);
        loaded_ = global_.sequences();
      } else if (ec) {
        fail("suffix state file '", opt_.state, "': cannot check it: ", ec.message());
      }
    }
  }

  std::string name() const override { return suffix_strategy_info().name; }
  std::unique_ptr<Strategy> spawn(int) override { return std::make_unique<SuffixStrategy>(opt_, sh_); }

  void begin_request(const std::vector<int32_t>& prompt) override {
    finish_pending();
    local_.clear();
    indexed_.clear();
    chained_ = false;  // the prompt is indexed by the first draft (sync): a sleeping strategy never pays for it
    prompt_len_ = prompt.size();
    active_ = true;
  }

  void plan(const std::vector<int32_t>& seq, int max_depth, StepPlan& out) override {
    LA_CHECK(!seq.empty(), "suffix: empty sequence");
    out.reset(seq.back());
    ++steps_;
    const int k = budget_or(opt_.max_tokens);
    if (k <= 0 || max_depth <= 0) return;
    const SuffixDraft& d = best_draft(seq, max_depth);
    const int n = std::min(k, d.size());
    for (int i = 0; i < n; ++i) out.add(d.tokens[i], d.parents[i] + 1, true);
    if (n > 0) ++hits_, from_global_ += (&d == &dg_);
    proposed_ += n;
  }

  void update(const std::vector<int32_t>&, const StepPlan&, const std::vector<int32_t>&,
              const Verdict& verdict) override {
    const int m = verdict.path.empty() ? 0 : static_cast<int>(verdict.path.size()) - 1;
    accepted_ += m;
    chained_ = m >= 2;
  }

  void end_request(const std::vector<int32_t>& seq) override {
    if (!active_) return;
    if (seq.size() > prompt_len_) {
      global_.add(seq.data() + prompt_len_, seq.size() - prompt_len_);
      state_.changed();
    }
    active_ = false;
    local_.clear();
    indexed_.clear();
    cached_len_ = 0;
  }

  // Another group's request: its output joins the global tree as this strategy's own do at their end (the
  // requests of a batch already add theirs while others are in flight).
  void learn(const std::vector<int32_t>& seq, size_t prompt_len) override {
    if (seq.size() <= prompt_len) return;
    global_.add(seq.data() + prompt_len, seq.size() - prompt_len);
    state_.changed();
    ++learned_;
  }

  // The global tree changes only when a request ends: a checkpoint mid-request writes nothing new.
  void checkpoint() override {
    state_.write_if_changed([this](const std::string& path) { global_.save(path); });
  }

  int max_draft_budget() const override { return std::max(0, opt_.max_tokens); }
  int draft_contexts() const override { return kClasses; }
  int draft_context(const std::vector<int32_t>& seq, int max_depth) override {
    hint_ = 0;
    if (opt_.max_tokens <= 0 || seq.empty() || max_depth <= 0) return 0;
    const SuffixDraft& d = best_draft(seq, max_depth);
    hint_ = d.size();
    const int c = d.score > 0 && chained_ ? kClasses - 1 : score_class(d.score);
    ++match_hist_[c][std::min(d.match_length, 16)];
    return c;
  }

  int draft_size_hint() const override { return hint_; }

  std::string draft_context_label(int c) const override {
    static const char* kLabels[kClasses] = {"E[acc] 0",     "E[acc] (0,0.5]", "E[acc] (0.5,1]", "E[acc] (1,2]",
                                            "E[acc] (2,4]", "E[acc] (4,8]",   "E[acc] > 8",     "chain"};
    return kLabels[std::clamp(c, 0, kClasses - 1)];
  }

  std::map<std::string, double> counters() const override {
    std::map<std::string, double> c = {
        {"suffix_steps", static_cast<double>(steps_)},
        {"suffix_hit_steps", static_cast<double>(hits_)},
        {"suffix_global_steps", static_cast<double>(from_global_)},
        {"suffix_proposed_tokens", static_cast<double>(proposed_)},
        {"suffix_accepted_tokens", static_cast<double>(accepted_)},
        {"suffix_learned_requests", static_cast<double>(learned_)},
        {"suffix_local_nodes", static_cast<double>(local_.size())},
        {"suffix_global_nodes", static_cast<double>(global_.tree_nodes())},
        {"suffix_global_pending", static_cast<double>(global_.pending())},
        {"suffix_global_sequences", static_cast<double>(global_.sequences())},
        {"suffix_global_bytes", static_cast<double>(global_.bytes())},
        {"suffix_global_evicted", static_cast<double>(global_.evicted())},
        {"suffix_loaded_sequences", static_cast<double>(loaded_)}};
    // Mean match length per context class: what the controller's classes stand for.
    for (int k = 0; k < kClasses; ++k) {
      double n = 0, s = 0;
      for (int l = 0; l <= 16; ++l) n += static_cast<double>(match_hist_[k][l]), s += static_cast<double>(match_hist_[k][l]) * l;
      if (n > 0) c["suffix_class" + std::to_string(k) + "_mean_match"] = s / n;
    }
    state_.add_counters(c, "suffix");
    return c;
  }

 private:
  // Indexes seq into the request's tree: the new tokens only when seq extends what is indexed (every step), all
  // of it otherwise (a plan without begin_request, or a sequence that changed).
  void sync(const std::vector<int32_t>& seq) {
    const size_t n = indexed_.size();
    const bool extends = seq.size() >= n && std::equal(indexed_.begin(), indexed_.end(), seq.begin());
    if (!extends) {
      local_.clear();
      indexed_.clear();
      cached_len_ = 0;
    }
    for (size_t i = indexed_.size(); i < seq.size(); ++i) {
      local_.append(seq[i]);
      indexed_.push_back(seq[i]);
    }
  }

  // The draft of this step (cached for the context call and the plan of the same sequence).
  const SuffixDraft& best_draft(const std::vector<int32_t>& seq, int max_depth) {
    sync(seq);
    max_depth = std::min(max_depth, opt_.depth);  // deeper than the tree never happens: one cache key
    if (cached_len_ == seq.size() && cached_depth_ == max_depth) return *cached_;
    const int max_match = std::max(1, opt_.depth / 2);
    auto grow = [&](SuffixTree& t, SuffixDraft& d) {
      const SuffixTree::Match m = t.match(seq.data(), seq.size(), max_match);
      const int cap = std::min(opt_.max_tokens,
                               static_cast<int>(std::ceil(opt_.factor * static_cast<double>(m.length))));
      t.draft(m, cap, opt_.min_prob, max_depth, d);
    };
    grow(local_, dl_);
    grow(global_.tree(), dg_);
    cached_ = dg_.score > dl_.score ? &dg_ : &dl_;
    cached_len_ = seq.size();
    cached_depth_ = max_depth;
    return *cached_;
  }

  void finish_pending() {
    cached_len_ = 0;
    active_ = false;
  }

  SuffixOptions opt_;
  SuffixTree local_;
  std::shared_ptr<Shared> sh_;
  SuffixGlobal& global_;
  StateCheckpoint& state_;
  size_t& loaded_;
  std::vector<int32_t> indexed_;
  SuffixDraft dl_, dg_;
  const SuffixDraft* cached_ = &dl_;
  size_t cached_len_ = 0;
  int cached_depth_ = -1;
  size_t prompt_len_ = 0;
  bool active_ = false;
  bool chained_ = false;  // the last step accepted 2 or more draft tokens
  int hint_ = -1;         // draft_size_hint(): the draft's nodes found by draft_context()
  uint64_t steps_ = 0, hits_ = 0, from_global_ = 0, proposed_ = 0, accepted_ = 0;
  uint64_t learned_ = 0;  // other groups' requests added by learn()
  uint64_t match_hist_[kClasses][17] = {};
};

}  // namespace

void add_suffix_flags(StrategyFlags& f, StrategyOptions& o) {
  auto& s = o.suffix;
  f.add("suffix-max-tokens", &s.max_tokens, "suffix: most draft nodes per step");
  f.add("suffix-depth", &s.depth, "suffix: tree depth (matches use up to half of it, drafts the rest)");
  f.add("suffix-factor", &s.factor, "suffix: a draft holds at most factor x match length nodes");
  f.add("suffix-min-prob", &s.min_prob, "suffix: drop draft nodes whose path probability is below this");
  f.add("suffix-global-mb", &s.global_mb, "suffix: memory bound of the global tree over earlier outputs "
                                          "(MiB; oldest evicted; 0: no global tree)");
  f.add("suffix-state", &s.state, "suffix: global tree file loaded at start, saved atomically after every finished request");
}

void validate_suffix_options(const StrategyOptions& so) {
  const SuffixOptions& o = so.suffix;
  LA_CHECK(o.max_tokens >= 0 && o.max_tokens <= 256, "--suffix-max-tokens must be in [0, 256] (got ", o.max_tokens,
           ")");
  LA_CHECK(o.depth >= 2 && o.depth <= 256, "--suffix-depth must be in [2, 256] (got ", o.depth, ")");
  LA_CHECK(std::isfinite(o.factor) && o.factor > 0 && o.factor <= 64, "--suffix-factor must be in (0, 64] (got ",
           o.factor, ")");
  LA_CHECK(std::isfinite(o.min_prob) && o.min_prob >= 0 && o.min_prob <= 1,
           "--suffix-min-prob must be in [0, 1] (got ", o.min_prob, ")");
  LA_CHECK(o.global_mb >= 0 && o.global_mb <= (int64_t{1} << 20), "--suffix-global-mb must be in [0, 1048576] (got ",
           o.global_mb, ")");
}

std::unique_ptr<Strategy> make_suffix_strategy(const StrategyOptions& o) {
  validate_suffix_options(o);
  return std::make_unique<SuffixStrategy>(o.suffix);
}

namespace {
// The state file belongs to one model and tokenizer: the vocabulary size always, the identity hash (weights and
// tokenizer files) only with --suffix-state (0 is reserved for "not checked").
void bind_suffix_model(StrategyOptions& o, const ModelIdentity& m) {
  o.suffix.vocab_size = m.vocab;
  if (o.suffix.state.empty()) return;
  const uint64_t h = m.hash();
  o.suffix.model_id = h == 0 ? 1 : h;
}
}  // namespace

const StrategyInfo& suffix_strategy_info() {
  static const StrategyInfo row{
      "suffix", "SuffixDecoding: suffix trees over this request and earlier outputs, drafts by probability",
      add_suffix_flags, validate_suffix_options,
      [](const StrategyOptions& o, StepModel*) { return make_suffix_strategy(o); }, nullptr, bind_suffix_model,
      [](StrategyOptions& o) { o.suffix.state_read_only = true; }};
  return row;
}

}  // namespace la
