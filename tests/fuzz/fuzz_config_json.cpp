// Fuzzes config.json: parse_model_config, then what the loader derives from an accepted config before it touches
// weights (parameter count, the expected tensor list via check_checkpoint against an empty checkpoint, context
// checks). An accepted config must pass validate() again.
#include "fuzz_common.h"
#include "lookahead/decode/generator.h"
#include "lookahead/model/config.h"
#include "lookahead/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  la::fuzz::rejecting([&] {
    const la::ModelConfig c = la::parse_model_config(text, "", "config.json");
    la::fuzz::must("accepted config fails validate()", [&] { c.validate(); });
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
