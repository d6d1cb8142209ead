// The start-up agreement (agreement.h).
#include "lookahead/dist/agreement.h"

#include <chrono>
#include <thread>

#include "lookahead/util/error.h"

namespace la {

void check_agreement(Comm& comm, uint64_t model_checksum, const std::string& params) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : params) h = (h ^ c) * 1099511628211ull;
  const auto models = comm.allgather(model_checksum);
  const auto ps = comm.allgather(h);
  std::string bad_model, bad_params;
  for (int r = 1; r < comm.size(); ++r) {
    if (models[r] != models[0]) bad_model += (bad_model.empty() ? "" : ", ") + std::to_string(r);
    if (ps[r] != ps[0]) bad_params += (bad_params.empty() ? "" : ", ") + std::to_string(r);
  }
  if (bad_model.empty() && bad_params.empty()) return;
  std::string msg = "ranks disagree with rank 0:";
  if (!bad_model.empty()) msg += " model weights (checksum) differ on rank(s) " + bad_model + ";";
  if (!bad_params.empty()) msg += " parameters differ on rank(s) " + bad_params + ";";
  msg += " every rank must load the same model with the same options";
  // Rank 0 reports (and its abort ends the job); the others wait a little so the job ends with one clear message,
  // then fail on their own should rank 0 not abort.
  if (comm.rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(10));
  throw Error(msg);
}

}  // namespace la
