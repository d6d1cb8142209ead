// A model folder's JSON files: config.json, generation_config.json and tokenizer_config.json, each read at most once
// per ModelDir through the checked JSON reader (util/json_parse.h), and their writer (save-model) beside the
// readers. Before, the two tokenizer loaders and the chat template each opened tokenizer_config.json with its own
// rule for a value that is not an object, and the CLI spelled "the --tokenizer directory, else the model's" in
// three places. A GGUF file (--model FILE.gguf) and a random: preset are paths without these files: callers check
// is_gguf_path / is_random_model first, as before.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace la {

struct ModelConfig;

class ModelDir {
 public:
  explicit ModelDir(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  std::string file(const char* name) const { return path_ + "/" + name; }
  bool has(const char* name) const;

  // tokenizer_config.json: null when the folder has none; invalid JSON or a value that is not an object is one
  // la::Error naming the file.
  const nlohmann::json* tokenizer_config() const;
  // config.json's text (la::Error when the folder or the file is missing) and generation_config.json's ("" when
  // absent), for parse_model_config.
  std::string config_text() const;
  std::string generation_config_text() const;

  // Writes config.json (as given) and generation_config.json (bos and eos ids of `c`) atomically.
  void write_config(const nlohmann::json& config, const ModelConfig& c) const;

 private:
  std::string path_;
  mutable bool tokenizer_config_read_ = false;
  mutable std::optional<nlohmann::json> tokenizer_config_;
};

// The folder the tokenizer, the chat template and the tokenizer files come from: `tokenizer_flag` (--tokenizer)
// when given, else the model's.
inline std::string tokenizer_dir_of(const std::string& model, const std::string& tokenizer_flag) {
  return tokenizer_flag.empty() ? model : tokenizer_flag;
}

}  // namespace la
