// The JSONL record parsers of generate --input, tokenize --input and --resume's output file (see the header).
#include "lookahead/io/prompt_records.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "lookahead/util/error.h"
#include "lookahead/util/json_parse.h"

namespace la {
namespace {

// An integer JSON value in [lo, hi] (hi >= 0), read without get<>()'s wrapping (4294967297 as an int32 is 1).
bool integer_in(const nlohmann::json& v, int64_t lo, int64_t hi) {
  return v.is_number_integer() && (v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(hi)
                                                          : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi);
}

// An integer value of `key` in [lo, hi], or an error naming the line, the key and the range.
int64_t int_in(const nlohmann::json& v, const std::string& where, const char* key, int64_t lo, int64_t hi) {
  LA_CHECK(integer_in(v, lo, hi), where, ": \"", key, "\" must be an integer in [", lo, ", ", hi, "] (got ", v.dump(), ")");
  return v.get<int64_t>();
}

float number_of(const nlohmann::json& v, const std::string& where, const char* key) {
  LA_CHECK(v.is_number() && std::isfinite(v.get<double>()), where, ": \"", key, "\" must be a number (got ", v.dump(),
           ")");
  return v.get<float>();
}

RecordGen parse_record_gen(const nlohmann::json& j, const std::string& where) {
  RecordGen g;
  constexpr int64_t kMaxNew = std::numeric_limits<int32_t>::max();
  for (const char* key : {"max_new_tokens", "max_tokens"}) {
    if (!j.contains(key)) continue;
    const int n = static_cast<int>(int_in(j[key], where, key, 0, kMaxNew));
    LA_CHECK(!g.max_new_tokens || *g.max_new_tokens == n, where, ": \"max_new_tokens\" and \"max_tokens\" differ");
    g.max_new_tokens = n;
  }
  if (j.contains("top_k")) g.top_k = static_cast<int>(int_in(j["top_k"], where, "top_k", 0, kMaxNew));
  if (j.contains("seed")) g.seed = int_in(j["seed"], where, "seed", 0, std::numeric_limits<int64_t>::max());
  if (j.contains("temperature")) {
    g.temperature = number_of(j["temperature"], where, "temperature");
    LA_CHECK(*g.temperature >= 0.f && std::isfinite(*g.temperature), where,
             ": \"temperature\" must be a finite number >= 0 (got ", j["temperature"].dump(), ")");
  }
  if (j.contains("stop")) {
    const nlohmann::json& v = j["stop"];
    const bool list = v.is_array() && std::all_of(v.begin(), v.end(), [](const nlohmann::json& x) {
      return x.is_string() && !x.get<std::string>().empty();
    });
    LA_CHECK((v.is_string() && !v.get<std::string>().empty()) || list, where,
             ": \"stop\" must be a non-empty string or a list of them (got ", v.dump(), ")");
    g.stop = v.is_string() ? std::vector<std::string>{v.get<std::string>()} : v.get<std::vector<std::string>>();
  }
  if (j.contains("top_p")) {
    g.top_p = number_of(j["top_p"], where, "top_p");
    LA_CHECK(*g.top_p > 0.f && *g.top_p <= 1.f, where, ": \"top_p\" must be in (0, 1] (got ", j["top_p"].dump(), ")");
  }
  return g;
}

}  // namespace

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
                     {},
                     parse_record_gen(j, where)};
  if (j.contains("prompt_ids")) {
    LA_CHECK(j["prompt_ids"].is_array() && !j["prompt_ids"].empty(), where,
             ": \"prompt_ids\" must be a non-empty array of token ids");
    for (auto& x : j["prompt_ids"]) {
      LA_CHECK(x.is_number_integer(), where, ": \"prompt_ids\" holds a non-integer");
      // get<int32_t>() would wrap 4294967297 to 1, a valid id (found by tests/fuzz).
      LA_CHECK(integer_in(x, INT32_MIN, INT32_MAX), where, ": \"prompt_ids\" holds ", x.dump(), ", outside any vocabulary");
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
      LA_CHECK(integer_in(x, 0, INT32_MAX), where, ": \"ids\" holds ", x.dump(), ", which is not a token id");
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
