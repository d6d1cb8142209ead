// Fuzzes tokenizer.json (Hugging Face BPE, byte-level and SentencePiece-style pipelines, parse_tokenizer_json),
// then encodes texts (ASCII, multi-byte and invalid UTF-8, special-token text, digits, whitespace), decodes ids
// (including out-of-range ones) and streams with TextStream. Every encoded id must lie inside the vocabulary. The
// tokenizer_config.json settings (add_bos_token, bos_token when the file names it, the model's bos id) vary with
// the input's size.
#include "fuzz_common.h"
#include "lookahead/tokenizer/tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  la::HfTokenizerConfig cfg;
  cfg.add_bos = static_cast<int>(size % 3) - 1;
  cfg.bos_token = size % 2 && text.find("<|begin_of_text|>") != std::string::npos ? "<|begin_of_text|>" : "";
  cfg.model_bos_id = size % 5 == 0 ? 1 : -1;
  la::fuzz::rejecting([&] {
    auto tok = la::parse_tokenizer_json(text, "tokenizer.json", cfg);
    const int v = tok->vocab_size();
    for (const char* s : {"Hello world", " 12345 apples,\tand  pears\r\n", "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                          "bad \xff\xfe utf8 \xc3", "<|begin_of_text|>hi<|end_of_text|>", "", "   ", "'s 're 'll"}) {
      const auto ids = tok->encode(s);
      for (int32_t id : ids)
        if (id < 0 || id >= v) la::fuzz::broken("tokenizer.json: encode produced an id outside the vocabulary");
      (void)tok->decode(ids);
      la::TextStream ts(*tok, ids, {0});
      std::vector<int32_t> gen;
      for (int32_t id : ids) {
        gen.push_back(id);
        (void)ts.push(gen);
      }
      (void)ts.finish();
    }
    (void)tok->decode({-1, 0, 1, v - 1, v, v + 1, 1 << 30});
  });
  return 0;
}
