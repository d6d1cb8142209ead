#include "lookahead/decode/strategies.h"
#include "lookahead/util/error.h"

namespace la {
std::unique_ptr<Strategy> make_ouroboros_strategy(const StrategyOptions&, StepModel*) {
  fail("--strategy ouroboros is not implemented yet");
}
}  // namespace la
