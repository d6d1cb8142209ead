// Chat templates without a Jinja engine (Debian has no C++ Jinja library): the template text is recognised as one
// of the common formats, as llama.cpp does, and rendered by hand exactly as transformers'
// apply_chat_template(messages, add_generation_prompt=True, tokenize=False) renders it. No libtorch.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace la {

class ModelDir;

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

// Template variables beyond the messages (transformers passes extra apply_chat_template kwargs to the template).
struct ChatOptions {
  bool enable_thinking = true;  // Qwen3: false renders the empty <think></think> block after the generation prompt
  std::string date_string;      // Llama-3.1+: "Today Date: ..." (""; the template's own: today, or its fixed date)
};

class ChatTemplate {
 public:
  enum class Kind { ChatML, Llama3, Llama2, Mistral, Qwen3, Llama31, Phi3, Gemma };
  // Recognises `jinja`; throws la::Error naming `origin` if it is not a known format.
  static ChatTemplate parse(const std::string& jinja, const std::string& bos_token, const std::string& eos_token,
                            const std::string& origin);
  // The template of a model directory: tokenizer_config.json "chat_template" (a string, or a list of
  // {"name", "template"} of which "default" is used), else chat_template.jinja. Throws if there is none.
  static ChatTemplate load(const std::string& model_dir);
  static bool has_template(const std::string& model_dir);
  static ChatTemplate load(const ModelDir& dir);  // its tokenizer_config.json read once (model_dir.h)
  static bool has_template(const ModelDir& dir);

  // The prompt text (special tokens as text: encode it without adding BOS). Throws on messages the format
  // cannot express (e.g. roles that do not alternate where the template requires it).
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                     const ChatOptions& options = {}) const;
  Kind kind() const { return kind_; }
  std::string name() const;
  // The system prompt the template inserts when the conversation has none ("" if it inserts none).
  const std::string& default_system() const { return default_system_; }

 private:
  Kind kind_ = Kind::ChatML;
  std::string bos_, eos_, default_system_, origin_;
  bool trim_ = true;  // Llama-3: message contents are trimmed
  // Llama-3.1+: the date line (fixed, or today's date when the template calls strftime_now).
  std::string fixed_date_;
  bool today_ = false;
  // Phi-3 variants: system turns (and only non-empty ones), the assistant header after each user turn
  // (Phi-3-medium), eos when there is no generation prompt, a leading bos.
  bool phi_system_ = true, phi_system_nonempty_ = false, phi_inline_ = false, phi_eos_ = true, phi_bos_ = false;
  // Gemma: Gemma-3 folds a system message into the first user turn, Gemma-2 refuses it; roles must alternate.
  bool gemma_system_prefix_ = false, gemma_alternate_ = true;
};

// Validates a JSON "messages" array: non-empty, objects with string "role" (system, user or assistant) and
// string "content"; a system message only first. Throws la::Error prefixed with `where`.
std::vector<ChatMessage> parse_chat_messages(const nlohmann::json& j, const std::string& where);

}  // namespace la
