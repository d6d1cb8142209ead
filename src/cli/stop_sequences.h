// Stop sequences by text (generate --stop, a record's "stop"): the StepRunner's StopSequences (step_runner.h) over
// the tokenizer. Each appended output token goes through the same incremental detokenizer as streaming and the
// records (TextStream), so "the output contains the stop sequence" is judged on the text the record will hold; the
// request ends at the first token whose text completes one (its ids a prefix of plain decoding's, that token
// included, as transformers' stop_strings; the record's text keeps the sequence, and "stop" names it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lookahead/decode/step_runner.h"
#include "lookahead/tokenizer/tokenizer.h"

namespace la::cli {

class TextStopSequences final : public StopSequences {
 public:
  // `tok` and `stops` must outlive this; `stops` non-empty, none of them empty.
  TextStopSequences(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids, const std::vector<int32_t>& eos_ids,
                    const std::vector<std::string>& stops);
  bool append(int32_t token) override;
  const std::string& matched() const { return matched_; }  // the stop sequence found ("" while none)

 private:
  const std::vector<std::string>& stops_;
  TextStream stream_;
  std::vector<int32_t> generated_;
  std::string text_;  // the output's text so far (characters complete)
  size_t longest_ = 0;
  std::string matched_;
};

}  // namespace la::cli
