// The one JSON reader for input files. nlohmann::json parses any depth, but copying, dumping and comparing a value
// recurse once per level, so a file of deeply nested brackets (a 100,000-deep "id" in a JSONL record, a nested
// "Sequence" in tokenizer.json) overflowed the stack (found by tests/fuzz and by `tokenize --input`). Every file
// the CLI reads goes through parse_json_checked or read_json_file; real configs nest < 10 levels.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace la {

constexpr int kMaxJsonDepth = 64;

// Throws nlohmann::json::parse_error on invalid JSON and std::runtime_error ("nesting deeper than N levels") on a
// too-deep document; callers that add their own context turn either into one la::Error.
nlohmann::json parse_json(std::string_view text, int max_depth = kMaxJsonDepth);

// The checked reader: parse_json, with any failure as one la::Error "<where>: invalid JSON (<reason>)".
nlohmann::json parse_json_checked(std::string_view text, const std::string& where, int max_depth = kMaxJsonDepth);

// The file at `path` through parse_json_checked (a missing or unreadable file is a la::Error naming it too).
nlohmann::json read_json_file(const std::string& path, int max_depth = kMaxJsonDepth);

}  // namespace la
