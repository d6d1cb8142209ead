// The strategy table: each --strategy name with its option check and its factory. Every strategy checks its own
// flags in its own file (validate_*_options next to its implementation); this file only dispatches.
#include "lookahead/decode/strategies.h"

#include "lookahead/util/error.h"

namespace la {
namespace {

struct StrategyEntry {
  const char* name;
  void (*validate)(const StrategyOptions&);
};

// In --help order. Every entry's options are checked whichever strategy runs, so a bad value is refused even
// when it is unused (as a typo in a script should be).
constexpr StrategyEntry kStrategies[] = {
    {"ar", validate_ar_options},
    {"jacobi", validate_jacobi_options},
    {"lade", validate_lade_options},
    {"trie", validate_trie_options},
    {"prompt-lookup", validate_prompt_lookup_options},
    {"ouroboros", validate_ouroboros_options},
};

}  // namespace

void StrategyOptions::validate() const {
  bool known = false;
  for (const auto& e : kStrategies) known = known || name == e.name;
  LA_CHECK(known, "invalid --strategy '", name, "' (expected ar, jacobi, lade, trie, prompt-lookup or ouroboros)");
  for (const auto& e : kStrategies) e.validate(*this);
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
