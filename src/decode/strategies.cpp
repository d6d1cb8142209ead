// The strategy registry: the one table of --strategy names. Each row's flags, check and factory live next to the
// strategy's implementation (strategy_*.cpp); this file only lists them and dispatches.
#include "lookahead/decode/strategies.h"

#include "lookahead/util/error.h"

namespace la {

const std::vector<StrategyInfo>& strategy_registry() {
  static const std::vector<StrategyInfo> table = {ar_strategy_info(),     jacobi_strategy_info(),
                                                  lade_strategy_info(),   trie_strategy_info(),
                                                  prompt_lookup_strategy_info(), ouroboros_strategy_info(),
                                                  suffix_strategy_info()};
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

std::string strategy_draft_model(const StrategyOptions& o) {
  const StrategyInfo* e = find_strategy(o.name);
  return e && e->draft_model ? e->draft_model(o) : std::string();
}

void bind_strategy_model(StrategyOptions& o, const ModelIdentity& id) {
  const StrategyInfo* e = find_strategy(o.name);
  if (e && e->bind_model) e->bind_model(o, id);
}

void read_only_strategy_state(StrategyOptions& o) {
  for (const auto& e : strategy_registry())
    if (e.read_only_state) e.read_only_state(o);
}

}  // namespace la
