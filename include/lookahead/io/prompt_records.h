// The records of the JSONL files the CLI reads: `generate --input`, `tokenize --input` (with and without --decode)
// and the `--output` file that `generate --resume` reads back. All parse each line with the checked JSON reader
// (util/json_parse.h).
// One record of a `generate --input` JSONL file: {"id": ..., "prompt": "..."}, {"id": ..., "prompt_ids": [...]} or
// {"id": ..., "messages": [{"role", "content"}...]} (a chat, rendered with the model's template), each optionally
// with its own generation settings (RecordGen).
// A pure function so the parsing is unit- and fuzz-testable without a model (tests/fuzz/fuzz_prompt_jsonl.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lookahead/tokenizer/chat_template.h"

namespace la {

// A record's own generation settings: each one given overrides the run's flag for this request alone (a job's
// prompts often want different lengths or temperatures; in a batch each request keeps its own). The keys are the
// flags' names with underscores: "max_new_tokens" (>= 0; 0: up to the context; OpenAI's "max_tokens" is read as
// the same), "temperature" (>= 0; 0: greedy), "top_k" (>= 0), "top_p" (in (0, 1]), "seed" (>= 0), "stop" (a
// string or a list of non-empty strings, replacing --stop; [] for none). A value of the wrong type or range is an
// error naming the line; other keys are ignored (datasets carry their own fields).
struct RecordGen {
  std::optional<int> max_new_tokens, top_k;
  std::optional<float> temperature, top_p;
  std::optional<int64_t> seed;
  std::optional<std::vector<std::string>> stop;
  bool any() const { return max_new_tokens || top_k || temperature || top_p || seed || stop; }
};

struct PromptRecord {
  nlohmann::json id;         // as given; default: the record's index
  std::string text;          // "prompt" (empty when only "prompt_ids" is given)
  std::vector<int32_t> ids;  // "prompt_ids" (empty: tokenize `text`)
  std::vector<ChatMessage> messages;  // "messages": a chat, rendered with the model's template before encoding
  RecordGen gen;                      // the record's own settings
};

// Parses one line. Returns false for a blank line (spaces, tabs, CR). `index` is the record's default id;
// `where` ("FILE:LINE") starts every error message. Throws la::Error on invalid JSON or a malformed record.
bool parse_prompt_record(const std::string& line, size_t index, const std::string& where, PromptRecord& out);

// One record of a `tokenize --input` JSONL file: {"id", "text"} (or "prompt") to encode; with `decode`,
// {"id", "ids": [...]} (non-negative 32-bit ids). Same contract as parse_prompt_record
// (tests/fuzz/fuzz_tokenize_jsonl.cpp).
struct TokenizeRecord {
  nlohmann::json id;         // as given; default: the record's index
  std::string text;          // to encode
  std::vector<int32_t> ids;  // to decode
};
bool parse_tokenize_record(const std::string& line, size_t index, const std::string& where, bool decode,
                           TokenizeRecord& out);

// One line of an --output file read back by --resume: Record (an object with an "id", in `out`), Blank, NotJson
// (invalid, or nested deeper than any record lookahead writes) or NoId. Never throws for bad input; the caller
// names the file and line (tests/fuzz/fuzz_resume_jsonl.cpp).
enum class OutputLine { Blank, Record, NotJson, NoId };
OutputLine parse_output_record(std::string_view line, nlohmann::json& out);

}  // namespace la
