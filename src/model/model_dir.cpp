#include "lookahead/model/model_dir.h"

#include "lookahead/model/config.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "lookahead/util/json_parse.h"

namespace la {

bool ModelDir::has(const char* name) const { return file_exists(file(name)); }

const nlohmann::json* ModelDir::tokenizer_config() const {
  if (!tokenizer_config_read_) {
    const std::string path = file("tokenizer_config.json");
    if (file_exists(path)) {
      nlohmann::json j = read_json_file(path);
      LA_CHECK(j.is_object(), path, ": not a JSON object");
      tokenizer_config_ = std::move(j);
    }
    tokenizer_config_read_ = true;  // only once read: a failed read fails again
  }
  return tokenizer_config_ ? &*tokenizer_config_ : nullptr;
}

std::string ModelDir::config_text() const {
  LA_CHECK(is_directory(path_), "model directory '", path_, "' does not exist");
  LA_CHECK(has("config.json"), "model directory '", path_, "' has no config.json");
  return read_file(file("config.json"));
}

std::string ModelDir::generation_config_text() const {
  return has("generation_config.json") ? read_file(file("generation_config.json")) : std::string();
}

void ModelDir::write_config(const nlohmann::json& config, const ModelConfig& c) const {
  write_file_atomic(file("config.json"), config.dump(2));
  write_file_atomic(file("generation_config.json"),
                    nlohmann::json{{"bos_token_id", c.bos_id}, {"eos_token_id", c.eos_ids}}.dump(2));
}

}  // namespace la
