// The bounded-depth JSON reader (see the header): a parser callback refuses a document before it nests deeper
// than the limit, so no caller ever holds a value deep enough to overflow the stack when it is copied or dumped.
#include "lookahead/util/json_parse.h"

#include <stdexcept>

#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace la {

nlohmann::json parse_json(std::string_view text, int max_depth) {
  using json = nlohmann::json;
  // The callback sees every value with its depth before the parser descends further.
  return json::parse(text.begin(), text.end(), [max_depth](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= max_depth)
      throw std::runtime_error("nesting deeper than " + std::to_string(max_depth) + " levels");
    return true;
  });
}

nlohmann::json parse_json_checked(std::string_view text, const std::string& where, int max_depth) {
  try {
    return parse_json(text, max_depth);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(where, ": invalid JSON (", e.what(), ")");
  }
}

nlohmann::json read_json_file(const std::string& path, int max_depth) {
  return parse_json_checked(read_file(path), path, max_depth);
}

}  // namespace la
