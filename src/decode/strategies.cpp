// The strategy registry: the one table of --strategy names. Each row's flags, check and factory live next to the
// strategy's implementation (strategy_*.cpp); this file only lists them and dispatches.
#include "lookahead/decode/strategies.h"

#include "lookahead/util/error.h"

namespace la {
namespace {

void no_flags(StrategyFlags&, StrategyOptions&) {}
std::unique_ptr<Strategy> make_ar(const StrategyOptions&, StepModel*) { return make_ar_strategy(); }
std::unique_ptr<Strategy> make_jacobi(const StrategyOptions& o, StepModel*) { return make_jacobi_strategy(o); }
std::unique_ptr<Strategy> make_lade(const StrategyOptions& o, StepModel*) { return make_lade_strategy(o); }
std::unique_ptr<Strategy> make_trie(const StrategyOptions& o, StepModel*) { return make_trie_strategy(o); }
std::unique_ptr<Strategy> make_suffix(const StrategyOptions& o, StepModel*) { return make_suffix_strategy(o); }
std::unique_ptr<Strategy> make_pl(const StrategyOptions& o, StepModel*) { return make_prompt_lookup_strategy(o); }

}  // namespace

const std::vector<StrategyInfo>& strategy_registry() {
  static const std::vector<StrategyInfo> table = {
      {"ar", "plain decoding: one token per forward (the baseline)", no_flags, validate_ar_options, make_ar},
      {"jacobi", "Jacobi decoding: a block of guesses refined by fixed-point iteration", add_jacobi_flags,
       validate_jacobi_options, make_jacobi},
      {"lade", "lookahead decoding: a 2D Jacobi window and an n-gram pool", add_lade_flags, validate_lade_options,
       make_lade},
      {"trie", "the Alipay trie over prompts and earlier outputs, best-first by frequency", add_trie_flags,
       validate_trie_options, make_trie},
      {"prompt-lookup", "one chain copied after the longest recurring suffix", add_prompt_lookup_flags,
       validate_prompt_lookup_options, make_pl},
      {"ouroboros", "a draft model drafting with LADE, lengthened by a phrase pool", add_ouroboros_flags,
       validate_ouroboros_options, make_ouroboros_strategy},
      {"suffix", "SuffixDecoding: suffix trees over this request and earlier outputs, drafts by probability",
       add_suffix_flags, validate_suffix_options, make_suffix},
  };
  return table;
}

const StrategyInfo* find_strategy(const std::string& name) {
  for (const auto& e : strategy_registry())
    if (name == e.name) return &e;
  return nullptr;
}

std::string strategy_names(const char* sep) {
  std::string s;
  for (const auto& e : strategy_registry()) s += (s.empty() ? "" : sep) + std::string(e.name);
  return s;
}

void StrategyOptions::validate() const {
  LA_CHECK(find_strategy(name) != nullptr, "invalid --strategy '", name, "' (expected ", strategy_names(", "), ")");
  // Every row's options are checked whichever strategy runs, so a bad value is refused even when it is unused
  // (as a typo in a script should be).
  for (const auto& e : strategy_registry()) e.validate(*this);
}

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& o, StepModel* draft) {
  o.validate();
  return find_strategy(o.name)->make(o, draft);
}

}  // namespace la
