// Start-up check of a lookahead-parallel job: every rank must hold the same model and run with the same options.
#pragma once
#include <cstdint>
#include <string>

#include "lookahead/dist/comm.h"

namespace la {

// Collective: every rank compares its model checksum and its parameter string (whatever must be identical on all
// ranks: model, dtype, sampling, strategy options...) with rank 0's. Throws la::Error naming the rank(s) that
// differ, on every rank.
void check_agreement(Comm& comm, uint64_t model_checksum, const std::string& params);

}  // namespace la
