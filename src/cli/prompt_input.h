// The prompts of a `generate` run: --prompt or the --input JSONL records (prompt_records.h), then their token
// ids: "prompt_ids" as given, "messages" and --chat through the model's chat template, else the tokenizer (the
// call `tokenize` makes). Every prompt is checked against the vocabulary and the context before any weights load.
#pragma once
#include <string>
#include <vector>

#include "generate_options.h"
#include "lookahead/decode/generator.h"
#include "lookahead/model/config.h"
#include "lookahead/model/model_dir.h"
#include "lookahead/tokenizer/tokenizer.h"
#include "lookahead/io/prompt_records.h"

namespace la::cli {

// --prompt as one record, or every record of --input (an error names the file and line; no prompts: an error).
std::vector<PromptRecord> read_prompts(const GenerateOptions& o);

// The generation settings of one request: the run's (the flags), with the record's own (RecordGen) in their place.
GenParams record_gen(const GenParams& run, const PromptRecord& p);
// The request's stop sequences: its record's "stop", else --stop (maybe none).
const std::vector<std::string>& record_stops(const GenerateOptions& o, const PromptRecord& p);
// "3 of 24 records set their own max_new_tokens (3), temperature (1)" for the start, or "" when none does: a
// dataset's own "temperature" field is obeyed, so the run says so.
std::string record_gen_line(const std::vector<PromptRecord>& prompts);

// Fills every prompt's ids and checks that each fits `cfg` with its max new tokens (errors name the prompt's id).
// A chat template (--chat, "messages" records) comes from `files`, the folder the tokenizer was opened from.
void tokenize_prompts(std::vector<PromptRecord>& prompts, const Tokenizer& tok, const ModelDir& files,
                      const ModelConfig& cfg, const GenerateOptions& o);

}  // namespace la::cli
