#include "prompt_input.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <unordered_map>

#include "lookahead/tokenizer/chat_template.h"
#include "lookahead/engine/llama.h"
#include "lookahead/model/model_dir.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "output_file.h"

namespace la::cli {
namespace {

// Token ids of a rendered chat, as transformers' apply_chat_template(tokenize=True) makes them: the template
// writes any BOS itself, so the tokenizer must not add one (no encode flag for that: drop the one it adds).
std::vector<int32_t> encode_chat(const Tokenizer& tok, const std::string& text, int bos_id) {
  std::vector<int32_t> ids = tok.encode(text);
  const std::vector<int32_t> empty = tok.encode("");
  if (!empty.empty() && empty[0] == bos_id && !ids.empty() && ids[0] == bos_id) ids.erase(ids.begin());
  return ids;
}

// The chat template when --chat is given or a record carries "messages" (and still needs its ids), else null.
std::unique_ptr<ChatTemplate> chat_template_for(const std::vector<PromptRecord>& prompts, const ModelDir& files,
                                                const GenerateOptions& o) {
  // The first record that carries "messages" and still needs its ids (end: none).
  const auto first_messages = std::find_if(prompts.begin(), prompts.end(), [](const PromptRecord& p) {
    return !p.messages.empty() && p.ids.empty();
  });
  const bool any_messages = first_messages != prompts.end();
  const char* flag = !o.chat_thinking.empty() ? "--chat-thinking" : !o.chat_date.empty() ? "--chat-date" : nullptr;
  if (!o.chat && !any_messages) {
    LA_CHECK(!flag, flag ? flag : "", " needs --chat or \"messages\" records (it is a chat template option)");
    return nullptr;
  }
  const std::string& tdir = files.path();
  LA_CHECK(!is_random_model(tdir), o.chat ? "--chat needs" : "\"messages\" records need",
           " a chat template: give a model directory (or --tokenizer DIR) that has one");
  // What to do instead depends on who asked for the template: --chat, or records that carry "messages".
  std::unique_ptr<ChatTemplate> t;
  try {
    t = std::make_unique<ChatTemplate>(ChatTemplate::load(files));
  } catch (const Error& e) {
    if (o.chat) fail(e.what(), ": drop --chat and give the prompt text as it should be fed");
    fail(e.what(), ": --input records with \"messages\" need one (first: id ", first_messages->id.dump(),
         "); give them as \"prompt\" text, or --tokenizer DIR with a chat template");
  }
  // A template option the template does not read would be silently ignored (as transformers does): refuse it.
  LA_CHECK(o.chat_thinking.empty() || t->kind() == ChatTemplate::Kind::Qwen3, "--chat-thinking: the chat template of ",
           tdir, " (", t->name(), ") has no enable_thinking switch (only Qwen3's has)");
  LA_CHECK(o.chat_date.empty() || t->kind() == ChatTemplate::Kind::Llama31, "--chat-date: the chat template of ", tdir,
           " (", t->name(), ") has no date line (only Llama-3.1 and later have)");
  return t;
}

ChatOptions chat_options(const GenerateOptions& o) {
  ChatOptions c;
  c.enable_thinking = o.chat_thinking != "off";
  c.date_string = o.chat_date;
  return c;
}

// " (id ...)" after "empty prompt" for --input records; nothing for --prompt.
std::string id_note(const PromptRecord& p, const GenerateOptions& o) {
  return o.from_file() ? " (id " + p.id.dump() + ")" : std::string();
}

// "prompt_ids" are used as given: each must be in the vocabulary.
void check_given_ids(const PromptRecord& p, const ModelConfig& cfg, const GenerateOptions& o) {
  for (auto t : p.ids)
    LA_CHECK(t >= 0 && t < cfg.vocab, "prompt ", p.id.dump(), ": token id ", t, " outside the vocabulary");
  check_fits(cfg, p.ids.size(), record_gen(o.gen, p).max_new_tokens);
}

std::vector<int32_t> encode_prompt(const PromptRecord& p, const Tokenizer& tok, const ChatTemplate* chat,
                                   const ModelConfig& cfg, const GenerateOptions& o) {
  if (!p.messages.empty()) return encode_chat(tok, chat->render(p.messages, true, chat_options(o)), cfg.bos_id);
  if (o.chat) return encode_chat(tok, chat->render({{"user", p.text}}, true, chat_options(o)), cfg.bos_id);
  return tok.encode(p.text);
}

}  // namespace

GenParams record_gen(const GenParams& run, const PromptRecord& p) {
  GenParams g = run;
  const RecordGen& r = p.gen;
  if (r.max_new_tokens) g.max_new_tokens = *r.max_new_tokens;
  if (r.temperature) g.sample.temperature = *r.temperature;
  if (r.top_k) g.sample.top_k = *r.top_k;
  if (r.top_p) g.sample.top_p = *r.top_p;
  if (r.seed) g.sample.seed = static_cast<uint64_t>(*r.seed);
  return g;
}

const std::vector<std::string>& record_stops(const GenerateOptions& o, const PromptRecord& p) {
  return p.gen.stop ? *p.gen.stop : o.stop;
}

std::string record_gen_line(const std::vector<PromptRecord>& prompts) {
  size_t any = 0, n[6] = {0, 0, 0, 0, 0, 0};
  for (const auto& p : prompts) {
    const RecordGen& r = p.gen;
    any += r.any();
    n[0] += bool(r.max_new_tokens), n[1] += bool(r.temperature), n[2] += bool(r.top_k), n[3] += bool(r.top_p);
    n[4] += bool(r.seed), n[5] += bool(r.stop);
  }
  if (any == 0) return "";
  static const char* const keys[6] = {"max_new_tokens", "temperature", "top_k", "top_p", "seed", "stop"};
  std::string line = std::to_string(any) + " of " + std::to_string(prompts.size()) + " records set their own ";
  const char* sep = "";
  for (int k = 0; k < 6; ++k)
    if (n[k] > 0) line += sep + std::string(keys[k]) + " (" + std::to_string(n[k]) + ")", sep = ", ";
  return line + " over the flags";
}

std::vector<PromptRecord> read_prompts(const GenerateOptions& o) {
  std::vector<PromptRecord> prompts;
  if (o.has_prompt) {
    PromptRecord p;
    p.text = o.prompt;
    prompts.push_back(std::move(p));
    return prompts;
  }
  // A pipe is read like a file (`--input <(jq ...)`, /dev/stdin): the records are read once, here.
  LA_CHECK(!is_directory(o.input), "--input '", o.input, "' is a directory, not a JSONL file");
  std::ifstream in(o.input);
  LA_CHECK(in.is_open(), "cannot read --input file '", o.input, "': ", std::strerror(errno));
  std::string line;
  int lineno = 0;
  // Records and --resume match requests by id: a repeated id is refused here, before any output is written
  // (--resume would refuse the output later, and a record could not be told from its twin).
  std::unordered_map<std::string, int> seen;
  while (std::getline(in, line)) {
    ++lineno;
    PromptRecord p;
    if (!parse_prompt_record(line, prompts.size(), o.input + ":" + std::to_string(lineno), p)) continue;
    const auto [at, fresh] = seen.emplace(id_key(p.id), lineno);
    LA_CHECK(fresh, o.input, ":", lineno, ": id ", at->first, " repeats line ", at->second,
             "'s (records and --resume match requests by id; a line without an id has its index as id)");
    prompts.push_back(std::move(p));
  }
  LA_CHECK(!prompts.empty(), "--input file '", o.input, "' holds no prompts");
  return prompts;
}

void tokenize_prompts(std::vector<PromptRecord>& prompts, const Tokenizer& tok, const ModelDir& files,
                      const ModelConfig& cfg, const GenerateOptions& o) {
  const std::unique_ptr<ChatTemplate> chat = chat_template_for(prompts, files, o);
  for (auto& p : prompts) {
    if (!p.ids.empty()) {  // pre-tokenized ("prompt_ids")
      check_given_ids(p, cfg, o);
      continue;
    }
    LA_CHECK(o.allow_empty || !p.text.empty() || !p.messages.empty(), "empty prompt", id_note(p, o),
             " (pass --allow-empty-prompt to generate from BOS alone)");
    p.ids = encode_prompt(p, tok, chat.get(), cfg, o);
    LA_CHECK(!p.ids.empty(), "empty prompt", id_note(p, o), ": it encodes to no tokens");
    try {
      check_fits(cfg, p.ids.size(), record_gen(o.gen, p).max_new_tokens);
    } catch (const Error& e) {
      fail(o.from_file() ? "prompt " + p.id.dump() + ": " : std::string(), e.what());
    }
  }
}

}  // namespace la::cli
