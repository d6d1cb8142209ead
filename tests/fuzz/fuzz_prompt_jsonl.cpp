// Fuzzes `generate --input` JSONL: every line through parse_prompt_record (as cmd_generate does). Accepted
// records must carry a string prompt or a non-empty id list, the ids must be the integers of the line, and a
// record's own settings must be in their flags' ranges.
#include <algorithm>
#include <string>

#include "fuzz_common.h"
#include "lookahead/io/prompt_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  la::fuzz::rejecting([&] {
    size_t start = 0, lineno = 0, n = 0;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      ++lineno;
      la::PromptRecord r;
      if (la::parse_prompt_record(line, n, "in.jsonl:" + std::to_string(lineno), r)) {
        ++n;
        const auto j = nlohmann::json::parse(line);
        if (j.contains("prompt_ids")) {
          const auto& a = j["prompt_ids"];
          if (r.ids.size() != a.size()) la::fuzz::broken("prompt_ids: id count differs");
          for (size_t i = 0; i < a.size(); ++i)
            if (a[i] != r.ids[i]) la::fuzz::broken("prompt_ids: an id changed value while parsed");
        } else if (!j["prompt"].is_string()) {
          la::fuzz::broken("prompt record without a string prompt accepted");
        }
        (void)r.id.dump();
        // A record's own settings are in the flags' ranges (prompt_records.h, RecordGen).
        const la::RecordGen& g = r.gen;
        if ((g.max_new_tokens && *g.max_new_tokens < 0) || (g.top_k && *g.top_k < 0) || (g.seed && *g.seed < 0) ||
            (g.temperature && !(*g.temperature >= 0.f && *g.temperature <= 3.5e38f)) ||
            (g.top_p && !(*g.top_p > 0.f && *g.top_p <= 1.f)) ||
            (g.stop && std::any_of(g.stop->begin(), g.stop->end(), [](const std::string& s) { return s.empty(); })))
          la::fuzz::broken("a record's own setting outside its range accepted");
      }
      start = end + 1;
    }
  });
  return 0;
}
