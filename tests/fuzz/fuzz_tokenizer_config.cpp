// Fuzzes tokenizer_config.json as Tokenizer::load reads it next to a valid tokenizer.model (the tok512 seed of
// the tokenizer_model target), then encodes a text.
#include "fuzz_common.h"
#include "lookahead/model/tokenizer.h"

namespace {
const std::string& model_dir() {
  static const std::string dir = [] {
    const std::string d = la::fuzz::scratch_dir() + "/tok";
    std::filesystem::create_directories(d);
    const std::string m = la::fuzz::read_source_file("tests/fuzz/tokenizer_model/tok512.model");
    la::fuzz::write_scratch("tok/tokenizer.model", m.data(), m.size());
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = model_dir();
  la::fuzz::write_scratch("tok/tokenizer_config.json", data, size);
  la::fuzz::rejecting([&] {
    auto tok = la::Tokenizer::load(dir, 1);
    const auto ids = tok->encode("Once upon a time");
    (void)tok->decode(ids);
  });
  return 0;
}
