// Prompt lookup decoding: one chain of up to pl_num_tokens tokens, copied from what followed the most recent
// earlier occurrence of the context's longest recurring suffix (lengths pl_max_ngram down to pl_min_ngram).
// The index over prompt + output grows incrementally with the sequence; it is reset per request.
#include <algorithm>

#include "lookahead/decode/strategies.h"
#include "lookahead/draft/prompt_lookup.h"
#include "lookahead/util/error.h"

namespace la {

namespace {

class PromptLookupStrategy : public Strategy {
 public:
  explicit PromptLookupStrategy(const StrategyOptions& opt)
      : opt_(opt), num_tokens_(opt.pl.num_tokens), index_(opt.pl.min_ngram, opt.pl.max_ngram) {
    chain_.reserve(static_cast<size_t>(std::max(0, num_tokens_)));  // the largest proposal: no step grows it
  }

  std::string name() const override { return prompt_lookup_strategy_info().name; }
  std::unique_ptr<Strategy> spawn(int) override { return std::make_unique<PromptLookupStrategy>(opt_); }

  void begin_request(const std::vector<int32_t>& prompt) override {
    index_.reset();
    chained_ = false;
  }

  void plan(const std::vector<int32_t>& seq, int max_depth, StepPlan& out) override {
    LA_CHECK(!seq.empty(), "prompt lookup: empty sequence");
    out.reset(seq.back());
    ++steps_;
    const int k = std::min(budget_or(num_tokens_), max_depth);
    if (k <= 0) return;
    index_.propose_into(seq.data(), seq.size(), k, chain_);
    int32_t parent = 0;
    for (int32_t t : chain_) parent = out.add(t, parent, true);
    if (!chain_.empty()) ++hits_;
    proposed_ += chain_.size();
  }

  void update(const std::vector<int32_t>& seq, const StepPlan& plan, const std::vector<int32_t>& results,
              const Verdict& verdict) override {
    const size_t m = verdict.path.empty() ? 0 : verdict.path.size() - 1;
    accepted_ += m;
    chained_ = m >= 2;
  }

  void end_request(const std::vector<int32_t>& seq) override { index_.reset(); }

  // A shorter proposal is a prefix of the longer one (same match, fewer tokens).
  int max_draft_budget() const override { return num_tokens_; }
  // Context: the suffix length that matches (0: nothing to propose), capped at 4; or 5, "chain": a match right
  // after a step that accepted 2 or more draft tokens. Copying a span (code, quoted text) accepts long runs step
  // after step, while a match of the same length elsewhere is often a chance repeat: judged apart, the first is
  // drafted long and the second short.
  int draft_contexts() const override { return 6; }
  int draft_context(const std::vector<int32_t>& seq, int max_depth) override {
    hint_ = 0;
    if (num_tokens_ <= 0 || seq.empty() || max_depth <= 0) return 0;  // nothing to draft: as no match
    // The whole proposal (not one token): its length is the plan's size at an unlimited budget (the hint).
    index_.propose_into(seq.data(), seq.size(), num_tokens_, chain_);
    hint_ = std::min(static_cast<int>(chain_.size()), max_depth);  // plan() cuts it at max_depth
    if (chain_.empty()) return 0;
    return chained_ ? 5 : std::min(4, index_.last_match_length());
  }

  int draft_size_hint() const override { return hint_; }

  std::string draft_context_label(int c) const override {
    if (c == 5) return "chain";
    return c == 0 ? "no match" : "match " + std::to_string(c) + (c == 4 ? "+" : "");
  }

  std::map<std::string, double> counters() const override {
    return {{"pl_steps", static_cast<double>(steps_)},
            {"pl_hit_steps", static_cast<double>(hits_)},
            {"pl_proposed_tokens", static_cast<double>(proposed_)},
            {"pl_accepted_tokens", static_cast<double>(accepted_)}};
  }

 private:
  StrategyOptions opt_;
  int num_tokens_;
  PromptLookup index_;
  std::vector<int32_t> chain_;  // the proposal, reused across steps
  bool chained_ = false;        // the last step accepted 2 or more draft tokens
  int hint_ = -1;               // draft_size_hint(): the proposal's length found by draft_context()
  uint64_t steps_ = 0, hits_ = 0, proposed_ = 0, accepted_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_prompt_lookup_strategy(const StrategyOptions& opt) {
  validate_prompt_lookup_options(opt);
  return std::make_unique<PromptLookupStrategy>(opt);
}

void add_prompt_lookup_flags(StrategyFlags& f, StrategyOptions& o) {
  f.add("pl-min-ngram", &o.pl.min_ngram, "prompt-lookup: shortest suffix to match");
  f.add("pl-max-ngram", &o.pl.max_ngram, "prompt-lookup: longest suffix to match");
  f.add("pl-num-tokens", &o.pl.num_tokens, "prompt-lookup: tokens proposed per step");
}

void validate_prompt_lookup_options(const StrategyOptions& so) {
  const PromptLookupOptions& o = so.pl;
  LA_CHECK(o.min_ngram >= 1 && o.min_ngram <= 64, "--pl-min-ngram must be in [1, 64] (got ", o.min_ngram,
           ")");
  LA_CHECK(o.max_ngram >= o.min_ngram && o.max_ngram <= 64,
           "--pl-max-ngram must be in [--pl-min-ngram, 64] = [", o.min_ngram, ", 64] (got ", o.max_ngram, ")");
  LA_CHECK(o.num_tokens >= 0 && o.num_tokens <= 256, "--pl-num-tokens must be in [0, 256] (got ",
           o.num_tokens, ")");
}

const StrategyInfo& prompt_lookup_strategy_info() {
  static const StrategyInfo row{"prompt-lookup", "one chain copied after the longest recurring suffix",
                                add_prompt_lookup_flags, validate_prompt_lookup_options,
                                [](const StrategyOptions& o, StepModel*) { return make_prompt_lookup_strategy(o); }};
  return row;
}

}  // namespace la
