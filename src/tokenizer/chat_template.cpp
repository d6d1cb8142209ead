// Chat templates recognised from their text and rendered by hand. Written here because no maintained C++ Jinja
// library is packaged in Debian; the formats covered are the ones llama.cpp also special-cases. Each render function
// mirrors one template's Jinja line by line (see tests/core/data/chat_templates.json for the reference outputs,
// produced by transformers' apply_chat_template).
#include "lookahead/tokenizer/chat_template.h"

#include <time.h>

#include <nlohmann/json.hpp>

#include "lookahead/model/gguf.h"
#include "lookahead/model/model_dir.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "lookahead/util/json_parse.h"

namespace la {
namespace {

bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

// Python's str.strip() / Jinja's trim for ASCII whitespace.
std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The value of the Jinja string literal that contains position `pos` of `t` (quotes ' or "), with its escapes
// (\n, \t, \\, \', \") resolved; "" if `pos` is not inside a literal.
std::string literal_around(const std::string& t, size_t pos) {
  size_t open = std::string::npos;
  char q = 0;
  bool in_block = false;  // quotes only count inside {{ }} and {% %}; text and {# comments #} are skipped
  for (size_t i = 0; i < pos; ++i) {
    const char c = t[i];
    const char n = i + 1 < t.size() ? t[i + 1] : 0;
    if (!in_block) {
      if (c == '{' && n == '#') {
        const size_t e = t.find("#}", i + 2);
        if (e == std::string::npos || e >= pos) return "";
        i = e + 1;
      } else if (c == '{' && (n == '{' || n == '%')) {
        in_block = true;
        ++i;
      }
    } else if (q) {
      if (c == '\\') ++i;
      else if (c == q) q = 0;
    } else if (c == '\'' || c == '"') {
      q = c;
      open = i;
    } else if ((c == '}' || c == '%') && n == '}') {
      in_block = false;
      ++i;
    }
  }
  if (!q) return "";
  std::string v;
  for (size_t i = open + 1; i < t.size(); ++i) {
    const char c = t[i];
    if (c == q) return v;
    if (c == '\\' && i + 1 < t.size()) {
      const char e = t[++i];
      v += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
    } else {
      v += c;
    }
  }
  return "";
}

// A ChatML template's built-in system prompt: a literal "<|im_start|>system\n...<|im_end|>" whose text is fixed
// (SmolLM2: "You are a helpful AI assistant named SmolLM, trained by Hugging Face"; Qwen2: "You are a helpful
// assistant."), emitted when the conversation does not start with a system message.
std::string chatml_default_system(const std::string& t) {
  const std::string head = "<|im_start|>system";
  for (size_t p = t.find(head); p != std::string::npos; p = t.find(head, p + 1)) {
    const std::string v = literal_around(t, p);
    const std::string start = head + "\n", end = "<|im_end|>";
    if (v.rfind(start, 0) != 0) continue;
    const size_t e = v.find(end);
    if (e == std::string::npos) continue;  // the literal stops after the header: content comes from a message
    return v.substr(start.size(), e - start.size());
  }
  return "";
}

// Python's str.strip('\n') family, as the Qwen3 template applies them.
std::string lstrip_nl(const std::string& s) {
  const size_t b = s.find_first_not_of('\n');
  return b == std::string::npos ? "" : s.substr(b);
}
std::string rstrip_nl(const std::string& s) {
  const size_t e = s.find_last_not_of('\n');
  return e == std::string::npos ? "" : s.substr(0, e + 1);
}
bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// The fixed date of a Llama-3.1 template: {%- set date_string = "26 Jul 2024" %}.
std::string llama31_fixed_date(const std::string& t) {
  const std::string key = "set date_string = \"";
  const size_t p = t.find(key);
  if (p == std::string::npos) return "";
  const size_t e = t.find('"', p + key.size());
  return e == std::string::npos ? "" : t.substr(p + key.size(), e - p - key.size());
}

void check_alternates(const std::vector<ChatMessage>& m, size_t first, const std::string& origin) {
  for (size_t i = first; i < m.size(); ++i)
    LA_CHECK((m[i].role == "user") == ((i - first) % 2 == 0), origin,
             ": conversation roles must alternate user/assistant/user/... after an optional system message");
}

std::string read_json_token(const nlohmann::json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

// A GGUF file's template: tokenizer.chat_template, with the texts of its BOS and EOS tokens.
bool gguf_template(const std::string& path, std::string& text, std::string& bos, std::string& eos) {
  const GgufFile f = GgufFile::open(path);
  text = f.get_string("tokenizer.chat_template");
  const GgufValue* toks = f.find("tokenizer.ggml.tokens");
  auto token = [&](const char* key) -> std::string {
    const int64_t id = f.get_int(key, -1);
    if (!toks || id < 0 || id >= static_cast<int64_t>(toks->strs.size())) return "";
    return toks->strs[static_cast<size_t>(id)];
  };
  bos = token("tokenizer.ggml.bos_token_id");
  eos = token("tokenizer.ggml.eos_token_id");
  return !text.empty();
}

}  // namespace

std::string ChatTemplate::name() const {
  switch (kind_) {
    case Kind::ChatML: return "chatml";
    case Kind::Llama3: return "llama3";
    case Kind::Llama2: return "llama2";
    case Kind::Mistral: return "mistral";
    case Kind::Qwen3: return "qwen3";
    case Kind::Llama31: return "llama3.1";
    case Kind::Phi3: return "phi3";
    case Kind::Gemma: return "gemma";
  }
  return "?";
}

ChatTemplate ChatTemplate::parse(const std::string& t, const std::string& bos, const std::string& eos,
                                 const std::string& origin) {
  ChatTemplate c;
  c.bos_ = bos;
  c.eos_ = eos;
  c.origin_ = origin;
  const char* hint = " (recognised: ChatML, Qwen3, Llama-3, Llama-3.1+ without tools, Phi-3, Gemma, "
                     "Llama-2/Mistral [INST]); apply the template yourself and give token ids as \"prompt_ids\" in "
                     "--input JSONL";
  if (has(t, "<|im_start|>") && has(t, "<|im_end|>") && (has(t, "enable_thinking") || has(t, "reasoning_content"))) {
    c.kind_ = Kind::Qwen3;  // ChatML with <think> blocks for assistant turns after the last user query
  } else if (has(t, "<|im_start|>") && has(t, "<|im_end|>")) {
    c.kind_ = Kind::ChatML;
    c.default_system_ = chatml_default_system(t);
  } else if (has(t, "<|start_header_id|>") && has(t, "<|eot_id|>") && has(t, "Cutting Knowledge Date: December 2023\\n") &&
             has(t, "Today Date: \" + date_string") && has(t, "system_message")) {
    // Llama-3.1/3.2/3.3: a system turn with the knowledge/date lines always; tools are never passed here.
    c.kind_ = Kind::Llama31;
    c.today_ = has(t, "strftime_now");
    c.fixed_date_ = llama31_fixed_date(t);
    LA_CHECK(c.today_ || !c.fixed_date_.empty(), origin, ": Llama-3.1+ chat template without a date_string", hint);
  } else if (has(t, "<|start_header_id|>") && has(t, "<|eot_id|>")) {
    LA_CHECK(!has(t, "Cutting Knowledge Date") && !has(t, "strftime_now") && !has(t, "date_string"), origin,
             ": Llama-3.1+ chat template with a date/tools preamble in a form not recognised", hint);
    c.kind_ = Kind::Llama3;
    c.trim_ = has(t, "| trim") || has(t, "|trim") || has(t, ".strip()");  // Llama-3 trims; some derivatives do not
  } else if (has(t, "'<|user|>") && has(t, "<|end|>") && !has(t, "'<|' + message['role']")) {
    c.kind_ = Kind::Phi3;
    c.phi_system_ = has(t, "'<|system|>");
    c.phi_system_nonempty_ = has(t, "message['role'] == 'system' and message['content']");
    c.phi_inline_ = has(t, "'<|end|>' + '\\n' + '<|assistant|>'");
    c.phi_eos_ = has(t, "{{ eos_token }}");
    c.phi_bos_ = has(t, "bos_token");
  } else if (has(t, "<start_of_turn>") && has(t, "<end_of_turn>") && has(t, "| trim") &&
             (has(t, "'model'") || has(t, "\"model\""))) {
    c.kind_ = Kind::Gemma;
    c.gemma_system_prefix_ = has(t, "first_user_prefix");
    c.gemma_alternate_ = has(t, "Conversation roles must alternate");
  } else if (has(t, "[INST]") && has(t, "<<SYS>>")) {
    c.kind_ = Kind::Llama2;
  } else if (has(t, "[INST]") && !has(t, "system_message") && !has(t, "[AVAILABLE_TOOLS]") &&
             !has(t, "' [INST] '")) {
    c.kind_ = Kind::Mistral;  // Mistral-7B-Instruct-v0.1: no system role, "[INST] x [/INST]answer</s>"
  } else {
    fail(origin, ": chat template not recognised", hint);
  }
  if (c.kind_ != Kind::ChatML && has(t, "bos_token"))
    LA_CHECK(!bos.empty(), origin, ": the ", c.name(), " chat template needs bos_token, which tokenizer_config.json lacks");
  if ((c.kind_ == Kind::Llama2 || c.kind_ == Kind::Mistral || c.kind_ == Kind::Phi3) && has(t, "eos_token"))
    LA_CHECK(!eos.empty(), origin, ": the ", c.name(), " chat template needs eos_token, which tokenizer_config.json lacks");
  return c;
}

bool ChatTemplate::has_template(const std::string& dir) { return has_template(ModelDir(dir)); }
ChatTemplate ChatTemplate::load(const std::string& dir) { return load(ModelDir(dir)); }

bool ChatTemplate::has_template(const ModelDir& d) {
  const std::string& dir = d.path();
  if (is_gguf_path(dir)) {
    std::string t, b, e;
    try {
      return gguf_template(dir, t, b, e);
    } catch (const Error&) {
      return false;
    }
  }
  if (d.has("chat_template.jinja")) return true;
  try {
    const nlohmann::json* j = d.tokenizer_config();
    return j && j->contains("chat_template") && !(*j)["chat_template"].is_null();
  } catch (const Error&) {  // unreadable or invalid: load() names the problem when a template is needed
    return false;
  }
}

ChatTemplate ChatTemplate::load(const ModelDir& d) {
  const std::string& dir = d.path();
  if (is_gguf_path(dir)) {  // --model FILE.gguf: tokenizer.chat_template
    std::string text, bos, eos;
    LA_CHECK(gguf_template(dir, text, bos, eos), "model '", dir, "' has no chat template (no metadata "
             "'tokenizer.chat_template')");
    return parse(text, bos, eos, dir + " (tokenizer.chat_template)");
  }
  const std::string cfg_path = d.file("tokenizer_config.json");
  const nlohmann::json* tc = d.tokenizer_config();
  static const nlohmann::json kNone = nlohmann::json::object();
  const nlohmann::json& cfg = tc ? *tc : kNone;
  std::string text, origin = cfg_path;
  if (cfg.contains("chat_template") && !cfg["chat_template"].is_null()) {
    const auto& ct = cfg["chat_template"];
    if (ct.is_string()) {
      text = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (const auto& e : ct)
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
          text = e["template"].get<std::string>();
      LA_CHECK(!text.empty(), cfg_path, ": \"chat_template\" is a list without a \"default\" entry");
    } else {
      fail(cfg_path, ": \"chat_template\" must be a string or a list of {\"name\", \"template\"}");
    }
  } else if (file_exists(dir + "/chat_template.jinja")) {
    origin = dir + "/chat_template.jinja";
    text = read_file(origin);
  } else {
    fail("model '", dir, "' has no chat template (no \"chat_template\" in tokenizer_config.json, no "
         "chat_template.jinja)");
  }
  LA_CHECK(!strip(text).empty(), origin, ": the chat template is empty");
  return parse(text, read_json_token(cfg, "bos_token"), read_json_token(cfg, "eos_token"), origin);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& m, bool add_generation_prompt,
                                 const ChatOptions& opt) const {
  LA_CHECK(!m.empty(), "chat: no messages");
  std::string out;
  const size_t n = m.size();
  switch (kind_) {
    case Kind::Qwen3: {  // Qwen3's template, minus the tools and tool-call branches (never used here)
      if (m[0].role == "system") out += "<|im_start|>system\n" + m[0].content + "<|im_end|>\n";
      size_t last_query = n - 1;  // the last user turn that is not a tool response
      for (size_t k = n; k-- > 0;)
        if (m[k].role == "user" && !(starts_with(m[k].content, "<tool_response>") &&
                                     ends_with(m[k].content, "</tool_response>"))) {
          last_query = k;
          break;
        }
      for (size_t i = 0; i < n; ++i) {
        const auto& x = m[i];
        if (x.role == "user" || (x.role == "system" && i > 0)) {
          out += "<|im_start|>" + x.role + "\n" + x.content + "<|im_end|>\n";
        } else if (x.role == "assistant") {
          std::string content = x.content, reasoning;
          const size_t close = x.content.find("</think>");
          if (close != std::string::npos) {
            const size_t last = x.content.rfind("</think>");
            content = lstrip_nl(x.content.substr(last + 8));
            const std::string before = rstrip_nl(x.content.substr(0, close));
            const size_t open = before.rfind("<think>");
            reasoning = lstrip_nl(open == std::string::npos ? before : before.substr(open + 7));
          }
          if (i > last_query && (i == n - 1 || !reasoning.empty()))
            out += "<|im_start|>assistant\n<think>\n" + rstrip_nl(lstrip_nl(reasoning)) + "\n</think>\n\n" +
                   lstrip_nl(content);
          else
            out += "<|im_start|>assistant\n" + content;
          out += "<|im_end|>\n";
        }
      }
      if (add_generation_prompt) {
        out += "<|im_start|>assistant\n";
        if (!opt.enable_thinking) out += "<think>\n\n</think>\n\n";
      }
      break;
    }
    case Kind::Llama31: {
      std::string date = opt.date_string;
      if (date.empty() && today_) {  // transformers' strftime_now: the local date, "%d %b %Y"
        char buf[64];
        const time_t now = time(nullptr);
        struct tm tmv;
        localtime_r(&now, &tmv);
        date = strftime(buf, sizeof buf, "%d %b %Y", &tmv) ? buf : "";
      }
      if (date.empty()) date = fixed_date_;
      const size_t first = m[0].role == "system" ? 1 : 0;
      out += bos_ + "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " +
             date + "\n\n" + (first ? strip(m[0].content) : "") + "<|eot_id|>";
      for (size_t i = first; i < n; ++i)
        out += "<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n" + strip(m[i].content) + "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    }
    case Kind::Phi3:
      if (phi_bos_) out += bos_;
      for (const auto& x : m) {
        if (x.role == "system") {
          if (phi_system_ && (!phi_system_nonempty_ || !x.content.empty()))
            out += "<|system|>\n" + x.content + "<|end|>\n";
        } else if (x.role == "user") {
          out += "<|user|>\n" + x.content + "<|end|>\n" + (phi_inline_ ? "<|assistant|>\n" : "");
        } else {
          out += (phi_inline_ ? "" : "<|assistant|>\n") + x.content + "<|end|>\n";
        }
      }
      if (!phi_inline_) out += add_generation_prompt ? "<|assistant|>\n" : phi_eos_ ? eos_ : "";
      break;
    case Kind::Gemma: {
      size_t first = 0;
      std::string prefix;
      if (m[0].role == "system") {
        LA_CHECK(gemma_system_prefix_, origin_, ": this Gemma chat template has no system role (System role not "
                 "supported)");
        prefix = m[0].content + "\n\n";
        first = 1;
      }
      if (gemma_alternate_) check_alternates(m, first, origin_);
      out += bos_;
      for (size_t i = first; i < n; ++i)
        out += "<start_of_turn>" + std::string(m[i].role == "assistant" ? "model" : m[i].role) + "\n" +
               (i == first ? prefix : "") + strip(m[i].content) + "<end_of_turn>\n";
      if (add_generation_prompt) out += "<start_of_turn>model\n";
      break;
    }
    case Kind::ChatML:
      if (!default_system_.empty() && m[0].role != "system")
        out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
      for (const auto& x : m) out += "<|im_start|>" + x.role + "\n" + x.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case Kind::Llama3:
      out += bos_;
      for (const auto& x : m)
        out += "<|start_header_id|>" + x.role + "<|end_header_id|>\n\n" + (trim_ ? strip(x.content) : x.content) +
               "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case Kind::Llama2: {  // the system message goes inside the first [INST]; add_generation_prompt is not used
      const size_t first = m[0].role == "system" ? 1 : 0;
      check_alternates(m, first, origin_);
      for (size_t i = first; i < m.size(); ++i) {
        std::string content = m[i].content;
        if (i == first && first == 1) content = "<<SYS>>\n" + m[0].content + "\n<</SYS>>\n\n" + content;
        if (m[i].role == "user") out += bos_ + "[INST] " + strip(content) + " [/INST]";
        else out += " " + strip(content) + " " + eos_;
      }
      break;
    }
    case Kind::Mistral:
      LA_CHECK(m[0].role != "system", origin_, ": this [INST] chat template has no system role");
      check_alternates(m, 0, origin_);
      out += bos_;
      for (const auto& x : m) out += x.role == "user" ? "[INST] " + x.content + " [/INST]" : x.content + eos_;
      break;
  }
  return out;
}

std::vector<ChatMessage> parse_chat_messages(const nlohmann::json& j, const std::string& where) {
  LA_CHECK(j.is_array() && !j.empty(), where, ": \"messages\" must be a non-empty array of {\"role\", \"content\"}");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    LA_CHECK(e.is_object() && e.contains("role") && e["role"].is_string() && e.contains("content") &&
                 e["content"].is_string(),
             where, ": messages[", i, "] must be an object with string \"role\" and \"content\"");
    ChatMessage msg{e["role"].get<std::string>(), e["content"].get<std::string>()};
    LA_CHECK(msg.role == "system" || msg.role == "user" || msg.role == "assistant", where, ": messages[", i,
             "] has role '", msg.role, "' (expected system, user or assistant)");
    LA_CHECK(msg.role != "system" || i == 0, where, ": messages[", i, "]: a system message may only come first");
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace la
