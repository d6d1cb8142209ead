// Fuzzes `tokenize --input` JSONL, with and without --decode: every line through parse_tokenize_record (as
// cmd_tokenize does; a separate reader from generate's until a deeply nested "id" crashed it). Accepted records
// must carry a string text, or ids that are exactly the line's non-negative integers; the id must print.
#include "fuzz_common.h"
#include "lookahead/util/json_parse.h"
#include "lookahead/io/prompt_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool decode : {false, true}) {
    la::fuzz::rejecting([&] {
      size_t start = 0, lineno = 0, n = 0;
      while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(start, end - start);
        ++lineno;
        la::TokenizeRecord r;
        if (la::parse_tokenize_record(line, n, "in.jsonl:" + std::to_string(lineno), decode, r)) {
          ++n;
          const auto j = la::parse_json(line);  // accepted, so valid and shallow
          if (decode) {
            const auto& a = j["ids"];
            if (r.ids.size() != a.size()) la::fuzz::broken("ids: id count differs");
            for (size_t i = 0; i < a.size(); ++i)
              if (a[i] != r.ids[i] || r.ids[i] < 0) la::fuzz::broken("ids: an id changed value while parsed");
          } else {
            const auto& t = j.contains("text") ? j["text"] : j["prompt"];
            if (!t.is_string() || t.get<std::string>() != r.text) la::fuzz::broken("text record: text differs");
          }
          (void)r.id.dump();
        }
        start = end + 1;
      }
    });
  }
  return 0;
}
