// Fuzzes config.json: parse_model_config, then what the loader derives from an accepted config before it touches
// weights (parameter count, the expected tensor list via check_checkpoint against an empty checkpoint, context
// checks). An accepted config must pass validate() again and hold the integers the file gives (no wrap-around).
#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "lookahead/decode/generator.h"
#include "lookahead/model/config.h"
#include "lookahead/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  la::fuzz::rejecting([&] {
    const la::ModelConfig c = la::parse_model_config(text, "", "config.json");
    la::fuzz::must("accepted config fails validate()", [&] { c.validate(); });
    const auto j = nlohmann::json::parse(text);  // accepted, so valid JSON
    auto same = [&](const char* key, int v) {
      if (j.contains(key) && j[key].is_number_integer() && j[key] != v) la::fuzz::broken("config: an integer field changed value");
    };
    same("hidden_size", c.hidden);
    same("intermediate_size", c.intermediate);
    same("num_hidden_layers", c.layers);
    same("num_attention_heads", c.heads);
    same("num_key_value_heads", c.kv_heads);
    same("head_dim", c.head_dim);
    same("vocab_size", c.vocab);
    same("max_position_embeddings", c.max_positions);
    same("bos_token_id", c.bos_id);
    if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer() &&
        (c.eos_ids.size() != 1 || j["eos_token_id"] != c.eos_ids[0]))
      la::fuzz::broken("config: eos_token_id changed value");
    (void)c.parameter_count();
    la::fuzz::rejecting([&] { la::check_fits(c, 1, 16); });
    try {
      la::check_checkpoint(la::SafetensorsCheckpoint{}, c, "fuzz");
      la::fuzz::broken("config: an empty checkpoint passed check_checkpoint");
    } catch (const la::Error&) {
    }
  });
  return 0;
}
