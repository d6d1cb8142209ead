// Fuzzes generation_config.json: parse_model_config with a valid config.json (stories260K's) and the fuzzed
// generation config. An accepted result must pass validate() (eos ids inside the vocabulary).
#include "fuzz_common.h"
#include "lookahead/model/config.h"

namespace {
const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 172,
  "num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 512,
  "max_position_embeddings": 512, "rms_norm_eps": 1e-05, "bos_token_id": 1, "eos_token_id": 2,
  "tie_word_embeddings": true, "hidden_act": "silu", "model_type": "llama"})";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  la::fuzz::rejecting([&] {
    const la::ModelConfig c = la::parse_model_config(kConfig, text, "config.json");
    la::fuzz::must("accepted generation config fails validate()", [&] { c.validate(); });
    if (c.bos_id < 0 || c.bos_id >= c.vocab) la::fuzz::broken("generation config: bos id outside the vocabulary");
  });
  return 0;
}
