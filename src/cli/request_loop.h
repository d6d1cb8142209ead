// A group owner's request loop: the prompts its RequestSource hands out (job_queue.h: on one process every prompt
// --resume did not find done, in order), one after another through the generator,
// streaming a --prompt's text, one --output record per prompt as it finishes followed by a checkpoint of the
// strategy's state (--trie-state, --pool-state, --suffix-state), progress lines, memory lines, and
// the clean stop on SIGINT/SIGTERM (the request in flight is finished within --stop-grace or dropped, never
// written half).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "generate_options.h"
#include "lookahead/decode/generator.h"
#include "lookahead/decode/strategy.h"
#include "lookahead/tokenizer/tokenizer.h"
#include "lookahead/io/prompt_records.h"
#include "job_queue.h"
#include "output_file.h"

namespace la::cli {

// What the loop reads (all owned by the caller).
struct RequestInputs {
  const GenerateOptions& o;
  const std::vector<PromptRecord>& prompts;
  const std::vector<char>& skip;       // skip[i]: prompt i is already in --output (--resume)
  const Tokenizer& tok;
  const std::vector<int32_t>& eos_ids;  // the eos that ends generation prints nothing
  int max_positions;                    // the model's context (the new-token budget of --max-new-tokens 0)
  const std::string& tag;
};

struct LoopResult {
  RequestStats total;                                   // over the prompts run here
  nlohmann::json per_prompt = nlohmann::json::array();  // stats per prompt, kept only for --stats-json
  size_t already = 0;        // prompts skipped by --resume
  size_t ran = 0;            // prompts run and written
  bool interrupted = false;  // stopped by a signal before the end
  bool dropped = false;      // the request in flight was cancelled (not written)
  size_t refused = 0;        // --batch: prompts that could never fit the KV budget (not written)
  std::vector<std::map<std::string, double>> slot_counters;  // --batch: every slot's strategy counters
};

// Records go to `src` (rank 0 writes them); src.poll() runs after every step.
LoopResult run_requests(const RequestInputs& in, Generator& gen, Strategy& strategy, RequestSource& src);

}  // namespace la::cli
