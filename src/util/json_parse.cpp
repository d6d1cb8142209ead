#include "lookahead/util/json_parse.h"

#include <stdexcept>

namespace la {

nlohmann::json parse_json(const std::string& text, int max_depth) {
  using json = nlohmann::json;
  // The callback sees every value with its depth before the parser descends further.
  return json::parse(text, [max_depth](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= max_depth)
      throw std::runtime_error("nesting deeper than " + std::to_string(max_depth) + " levels");
    return true;
  });
}

}  // namespace la
