// Fuzzes tokenizer.model: Tokenizer::load (sentencepiece, Debian's library, loading the fuzzed bytes) on a
// directory holding only that file, then encode / decode / TextStream on the loaded model. The seeds include a
// real 512-piece model (llama2.c's tok512, from ../shared/models).
#include "fuzz_common.h"
#include "lookahead/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  la::fuzz::write_scratch("tokenizer.model", data, size);
  la::fuzz::rejecting([&] {
    auto tok = la::Tokenizer::load(la::fuzz::scratch_dir(), 1);
    const int v = tok->vocab_size();
    const auto ids = tok->encode("Once upon a time, \xc3\xa9t\xc3\xa9 \xe2\x82\xac 42\n");
    (void)tok->decode(ids);
    (void)tok->decode({-1, 0, 1, 2, 3, v - 1, v, v + 1, 1 << 30});
    la::TextStream ts(*tok, ids);
    std::vector<int32_t> gen;
    for (int32_t i = 0; i < 8 && v > 0; ++i) {
      gen.push_back((i * 37) % v);
      (void)ts.push(gen);
    }
  });
  return 0;
}
