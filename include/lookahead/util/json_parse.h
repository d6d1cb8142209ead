// JSON parsing with a nesting limit. nlohmann::json parses any depth, but copying, dumping and comparing a value
// recurse once per level, so a file of deeply nested brackets (a 100,000-deep "id" in a JSONL record, a nested
// "Sequence" in tokenizer.json) overflowed the stack (found by tests/fuzz). Real configs nest < 10 levels.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace la {

constexpr int kMaxJsonDepth = 64;

// Throws nlohmann::json::parse_error on invalid JSON and std::runtime_error ("nesting deeper than N levels") on a
// too-deep document; callers turn either into one la::Error naming their file.
nlohmann::json parse_json(const std::string& text, int max_depth = kMaxJsonDepth);

}  // namespace la
