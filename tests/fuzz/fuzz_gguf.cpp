// Fuzzes a GGUF file: the reader (GgufFile::parse on the bytes in memory), then what --model FILE.gguf does with a
// file that parsed: the model config from its metadata, the weight list and the dequantization of every weight,
// the embedded tokenizer (built and run on a short text) and the chat template. A la::Error at any stage is a clean
// rejection; after a successful parse every tensor must lie inside the input (its first and last bytes are read).
// Seeds (gguf/): the reader's known-answer fixture and a tiny llama model with a SentencePiece-style vocabulary.
#include "fuzz_common.h"
#include "lookahead/model/quant.h"
#include "lookahead/tokenizer/chat_template.h"
#include "lookahead/model/gguf.h"
#include "lookahead/model/gguf_model.h"
#include "lookahead/tokenizer/gguf_tokenizer.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  la::fuzz::rejecting([&] {
    const la::GgufFile f = la::GgufFile::parse(data, size, "fuzz.gguf");
    for (const auto& t : f.tensors()) {
      if (t.data < data || t.data + t.nbytes > data + size) la::fuzz::broken("gguf: tensor outside the input");
      if (t.nbytes > 0) {
        const auto* p = static_cast<const volatile uint8_t*>(t.data);
        (void)p[0];
        (void)p[t.nbytes - 1];
      }
    }
    try {
      auto tok = la::load_gguf_tokenizer(f, -1);
      const auto ids = tok->encode("Once upon a <s> time\xe2\x96\x81 \xff");
      (void)tok->decode(ids);
    } catch (const la::Error&) {
    }
    const la::ModelConfig c = la::gguf_model_config(f);
    for (const auto& w : la::gguf_weights(f, c)) {
      std::vector<float> out(static_cast<size_t>(w.tensor->numel()));
      la::gguf_dequantize(w, out.data());
    }
  });
  la::fuzz::rejecting([&] {  // the chat template is read from a file path
    const std::string path = la::fuzz::write_scratch("model.gguf", data, size);
    if (la::ChatTemplate::has_template(path)) (void)la::ChatTemplate::load(path).render({{"user", "hi"}});
  });
  return 0;
}
