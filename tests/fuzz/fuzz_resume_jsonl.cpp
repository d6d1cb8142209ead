// Fuzzes the --output JSONL file that `generate --resume` reads back: every line through parse_output_record (as
// JsonlOutput does). A Record must be an object with an "id" that dumps (the resume key), and the checked reader
// must never hand back a value nested deep enough to overflow the stack when dumped.
#include "fuzz_common.h"
#include "lookahead/io/prompt_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    nlohmann::json rec;
    const auto kind = la::parse_output_record(std::string_view(text).substr(start, end - start), rec);
    if (kind == la::OutputLine::Record) {
      if (!rec.is_object() || !rec.contains("id")) la::fuzz::broken("a record without an id accepted");
      (void)rec["id"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      (void)rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    start = end + 1;
  }
  return 0;
}
