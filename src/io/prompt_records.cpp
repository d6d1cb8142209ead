// The JSONL record parsers of generate --input, tokenize --input and --resume's output file (see the header).
#include "lookahead/io/prompt_records.h"

#include <cstdint>

#include "lookahead/util/error.h"
#include "lookahead/util/json_parse.h"

namespace la {

bool parse_prompt_record(const std::string& line, size_t index, const std::string& where, PromptRecord& out) {
  using json = nlohmann::json;
  if (line.find_first_not_of(" \t\r") == std::string::npos) return false;
  const json j = parse_json_checked(line, where);
  LA_CHECK(j.is_object() && ((j.contains("prompt") && j["prompt"].is_string()) || j.contains("prompt_ids") ||
                               j.contains("messages")),
           where, ": expected an object with a string \"prompt\" (or \"prompt_ids\" or \"messages\")");
  out = PromptRecord{j.contains("id") ? j["id"] : json(static_cast<int>(index)),
                     j.contains("prompt") && j["prompt"].is_string() ? j["prompt"].get<std::string>() : std::string(),
                     {},
                     {}};
  if (j.contains("prompt_ids")) {
    LA_CHECK(j["prompt_ids"].is_array() && !j["prompt_ids"].empty(), where,
             ": \"prompt_ids\" must be a non-empty array of token ids");
    for (auto& x : j["prompt_ids"]) {
      LA_CHECK(x.is_number_integer(), where, ": \"prompt_ids\" holds a non-integer");
      // get<int32_t>() would wrap 4294967297 to 1, a valid id (found by tests/fuzz).
      const bool fits = x.is_number_unsigned() ? x.get<uint64_t>() <= uint64_t(INT32_MAX)
                                               : x.get<int64_t>() >= INT32_MIN && x.get<int64_t>() <= INT32_MAX;
      LA_CHECK(fits, where, ": \"prompt_ids\" holds ", x.dump(), ", outside any vocabulary");
      out.ids.push_back(x.get<int32_t>());
    }
  } else if (j.contains("messages")) {
    out.messages = parse_chat_messages(j["messages"], where);
  }
  return true;
}

bool parse_tokenize_record(const std::string& line, size_t index, const std::string& where, bool decode,
                           TokenizeRecord& out) {
  using json = nlohmann::json;
  if (line.find_first_not_of(" \t\r") == std::string::npos) return false;
  const json j = parse_json_checked(line, where);
  LA_CHECK(j.is_object(), where, ": expected a JSON object");
  out = TokenizeRecord{j.contains("id") ? j["id"] : json(index), {}, {}};
  if (decode) {
    LA_CHECK(j.contains("ids"), where, ": expected an object with \"ids\": [...]");
    const json& v = j["ids"];
    LA_CHECK(v.is_array(), where, ": \"ids\" must be an array of token ids");
    for (const auto& x : v) {
      LA_CHECK(x.is_number_integer() && (x.is_number_unsigned() ? x.get<uint64_t>() <= uint64_t(INT32_MAX)
                                                                 : x.get<int64_t>() >= 0 && x.get<int64_t>() <= INT32_MAX),
               where, ": \"ids\" holds ", x.dump(), ", which is not a token id");
      out.ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
  } else {
    const char* key = j.contains("text") ? "text" : "prompt";
    LA_CHECK(j.contains(key) && j[key].is_string(), where,
             ": expected an object with a string \"text\" (or \"prompt\")");
    out.text = j[key].get<std::string>();
  }
  return true;
}

OutputLine parse_output_record(std::string_view line, nlohmann::json& out) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return OutputLine::Blank;
  try {
    out = parse_json(line);
  } catch (const std::exception&) {
    return OutputLine::NotJson;
  }
  return out.is_object() && out.contains("id") ? OutputLine::Record : OutputLine::NoId;
}

}  // namespace la
