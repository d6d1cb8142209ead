// TEMPORARY weak stubs while the trie and prompt-lookup strategies are written; the real ones override these.
#include "lookahead/decode/strategies.h"
#include "lookahead/util/error.h"
namespace la {
__attribute__((weak)) std::unique_ptr<Strategy> make_trie_strategy(const StrategyOptions&) { fail("trie: not built"); }
__attribute__((weak)) std::unique_ptr<Strategy> make_prompt_lookup_strategy(const StrategyOptions&) {
  fail("prompt-lookup: not built");
}
}  // namespace la
