#include "lookahead/model/step_model.h"

namespace la {

StepInput StepInput::chain(const std::vector<int32_t>& tokens, int32_t start) {
  StepInput in;
  in.tokens = tokens;
  const int32_t n = static_cast<int32_t>(tokens.size());
  in.positions.resize(n);
  in.parents.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    in.positions[i] = start + i;
    in.parents[i] = i - 1;
  }
  return in;
}

void append_chain(StepModel& m, const std::vector<int32_t>& tokens) {
  if (tokens.empty()) return;
  StepInput in = StepInput::chain(tokens, m.cache_len());
  in.first_output = static_cast<int32_t>(tokens.size());  // no prompt row's next token is read
  m.forward(in, SampleParams{});
  std::vector<int32_t> idx(tokens.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
  m.commit(idx);
}

double position_uniform(uint64_t seed, uint64_t stream, int64_t pos) {
  // splitmix64 over a mix of the three keys; 53 random bits.
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL ^ (stream + 0x632BE59BD9B4E019ULL) * 0xBF58476D1CE4E5B9ULL ^
               static_cast<uint64_t>(pos) * 0x94D049BB133111EBULL;
  for (int r = 0; r < 2; ++r) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
  }
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace la
