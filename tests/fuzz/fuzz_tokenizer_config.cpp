// Fuzzes tokenizer_config.json as Tokenizer::load reads it next to a valid tokenizer.model (the tok512 seed of
// the tokenizer_model target) and next to a valid tokenizer.json (the llama3 seed of the tokenizer_json target:
// add_bos_token and bos_token matter there), then encodes a text.
#include "fuzz_common.h"
#include "lookahead/tokenizer/tokenizer.h"

namespace {
std::string make_dir(const char* name, const char* file, const char* seed) {
  const std::string d = la::fuzz::scratch_dir() + "/" + name;
  std::filesystem::create_directories(d);
  const std::string m = la::fuzz::read_source_file(seed);
  la::fuzz::write_scratch(std::string(name) + "/" + file, m.data(), m.size());
  return d;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string sp = make_dir("sp", "tokenizer.model", "tests/fuzz/tokenizer_model/tok512.model");
  static const std::string hf = make_dir("hf", "tokenizer.json", "tests/fuzz/tokenizer_json/llama3.json");
  for (const std::string* dir : {&sp, &hf}) {
    la::fuzz::write_scratch(dir->substr(la::fuzz::scratch_dir().size() + 1) + "/tokenizer_config.json", data, size);
    la::fuzz::rejecting([&] {
      auto tok = la::Tokenizer::load(*dir, dir == &sp ? 1 : -1);
      const auto ids = tok->encode("Once upon a time");
      (void)tok->decode(ids);
    });
  }
  return 0;
}
