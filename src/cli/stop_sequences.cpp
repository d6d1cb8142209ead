#include "stop_sequences.h"

#include <algorithm>

namespace la::cli {

TextStopSequences::TextStopSequences(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids,
                                     const std::vector<int32_t>& eos_ids, const std::vector<std::string>& stops)
    : stops_(stops), stream_(tok, prompt_ids, eos_ids) {
  for (const auto& s : stops_) longest_ = std::max(longest_, s.size());
}

bool TextStopSequences::append(int32_t token) {
  generated_.push_back(token);
  const size_t before = text_.size();
  text_ += stream_.push(generated_);
  if (text_.size() == before) return false;
  // Only a sequence that ends in the new text can be new: search from longest - 1 bytes before it.
  const size_t from = before >= longest_ ? before - (longest_ - 1) : 0;
  for (const auto& s : stops_)
    if (text_.find(s, from) != std::string::npos) {
      matched_ = s;
      return true;
    }
  return false;
}

}  // namespace la::cli
