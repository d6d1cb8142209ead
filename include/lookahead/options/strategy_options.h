// The drafting strategies' flags on a Boost.Program_options description: `generate` and la_replay_acceptance.
#pragma once
#include <boost/program_options.hpp>

#include "lookahead/decode/strategies.h"

namespace la {

// Binds --strategy (default s.name; its help lists the registry's names), --draft-seed and every registry row's
// flags (StrategyFlags) to `s`; each flag's default is the value it points at.
void add_strategy_options(boost::program_options::options_description& d, StrategyOptions& s);

}  // namespace la
