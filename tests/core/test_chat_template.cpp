// Chat templates rendered without Jinja equal transformers' renderings (fixtures made by
// tests/scripts/chat_template_fixtures.py; test_chat_template_fixtures.sh checks they still match transformers),
// and bad templates, configs and messages give clear errors. Also the bare-name model resolution.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lookahead/tokenizer/chat_template.h"
#include "lookahead/model/model_path.h"
#include "lookahead/util/files.h"
#include "common/expect_error.h"
#include "common/temp_dir.h"

using namespace la;
using nlohmann::json;
using la::test::error_of;

namespace {

json fixtures() { return json::parse(read_file(std::string(LA_SOURCE_DIR) + "/tests/core/data/chat_templates.json")); }

std::vector<ChatMessage> msgs(const json& j) { return parse_chat_messages(j, "fixture"); }

// The extra template variables a fixture was rendered with.
ChatOptions options(const json& c) {
  ChatOptions o;
  if (!c.contains("kwargs")) return o;
  const auto& k = c["kwargs"];
  if (k.contains("enable_thinking")) o.enable_thinking = k["enable_thinking"].get<bool>();
  if (k.contains("date_string")) o.date_string = k["date_string"].get<std::string>();
  return o;
}

}  // namespace

TEST(ChatTemplate, EqualsTransformersOnEveryFixture) {
  const json fx = fixtures();
  int rendered = 0, refused = 0;
  for (const auto& c : fx["cases"]) {
    SCOPED_TRACE(c["template_name"].get<std::string>() + " " + c["messages"].dump() +
                 (c["add_generation_prompt"].get<bool>() ? " +gen" : "") + (c.contains("kwargs") ? c["kwargs"].dump() : ""));
    auto t = ChatTemplate::parse(c["template"], c["bos_token"], c["eos_token"], "fixture");
    if (c.contains("expected")) {
      EXPECT_EQ(t.render(msgs(c["messages"]), c["add_generation_prompt"], options(c)), c["expected"].get<std::string>());
      ++rendered;
    } else {
      EXPECT_NE(error_of([&] { t.render(msgs(c["messages"]), c["add_generation_prompt"], options(c)); }), "<no error>");
      ++refused;
    }
  }
  EXPECT_GE(rendered, 300);
  EXPECT_GE(refused, 20);
}

TEST(ChatTemplate, RecognisesFormatsAndDefaultSystemPrompt) {
  const json fx = fixtures();
  std::map<std::string, std::string> kinds;
  for (const auto& c : fx["cases"]) {
    auto t = ChatTemplate::parse(c["template"], c["bos_token"], c["eos_token"], "fixture");
    kinds[c["template_name"]] = t.name();
    if (c["template_name"] == "smollm2") {
      EXPECT_EQ(t.default_system(), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
    }
    if (c["template_name"] == "qwen2") { EXPECT_EQ(t.default_system(), "You are a helpful assistant."); }
    if (c["template_name"] == "chatml") { EXPECT_EQ(t.default_system(), ""); }
  }
  EXPECT_EQ(kinds["smollm2"], "chatml");
  EXPECT_EQ(kinds["llama3"], "llama3");
  EXPECT_EQ(kinds["llama2"], "llama2");
  EXPECT_EQ(kinds["mistral"], "mistral");
  EXPECT_EQ(kinds["qwen2"], "chatml");
  EXPECT_EQ(kinds["qwen3"], "qwen3");
  EXPECT_EQ(kinds["llama3.1"], "llama3.1");
  EXPECT_EQ(kinds["llama3.2"], "llama3.1");
  EXPECT_EQ(kinds["phi3"], "phi3");
  EXPECT_EQ(kinds["phi3.5"], "phi3");
  EXPECT_EQ(kinds["phi3-medium"], "phi3");
  EXPECT_EQ(kinds["gemma2"], "gemma");
  EXPECT_EQ(kinds["gemma3"], "gemma");
}

// Llama-3.2's template dates its system turn with strftime_now("%d %b %Y") (today, local time, as transformers'
// strftime_now); Llama-3.1/3.3's with its fixed "26 Jul 2024". A given date_string wins in both.
TEST(ChatTemplate, LlamaDateLine) {
  std::string l31, l32;
  const json fx = fixtures();
  for (const auto& c : fx["cases"]) {
    if (c["template_name"] == "llama3.1") l31 = c["template"].get<std::string>();
    if (c["template_name"] == "llama3.2") l32 = c["template"].get<std::string>();
  }
  const std::vector<ChatMessage> m = {{"user", "hi"}};
  char buf[64];
  const time_t now = time(nullptr);
  struct tm tmv;
  localtime_r(&now, &tmv);
  strftime(buf, sizeof buf, "%d %b %Y", &tmv);
  const auto t32 = ChatTemplate::parse(l32, "<|begin_of_text|>", "<|eot_id|>", "f");
  EXPECT_NE(t32.render(m).find(std::string("Today Date: ") + buf + "\n\n<|eot_id|>"), std::string::npos);
  const auto t31 = ChatTemplate::parse(l31, "<|begin_of_text|>", "<|eot_id|>", "f");
  EXPECT_NE(t31.render(m).find("Today Date: 26 Jul 2024\n\n<|eot_id|>"), std::string::npos);
  ChatOptions o;
  o.date_string = "02 Feb 2022";
  EXPECT_NE(t31.render(m, true, o).find("Today Date: 02 Feb 2022\n"), std::string::npos);
  // Other templates ignore the options.
  EXPECT_EQ(ChatTemplate::parse(fixtures()["cases"][0]["template"], "", "", "f").render(m, true, o),
            ChatTemplate::parse(fixtures()["cases"][0]["template"], "", "", "f").render(m));
}

TEST(ChatTemplate, UnknownTemplateIsRefusedWithAHint) {
  const std::string gemma =
      "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + "
      "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}";
  const auto e = error_of([&] { ChatTemplate::parse(gemma, "<bos>", "<eos>", "cfg.json"); });
  EXPECT_NE(e.find("cfg.json: chat template not recognised"), std::string::npos) << e;
  EXPECT_NE(e.find("prompt_ids"), std::string::npos) << e;
  const auto e31 = error_of([&] {
    ChatTemplate::parse("{{- bos_token }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}<|start_header_id|><|eot_id|>",
                        "<|begin_of_text|>", "<|eot_id|>", "cfg.json");
  });
  EXPECT_NE(e31.find("Llama-3.1+"), std::string::npos) << e31;
  const auto nobos = error_of([&] {
    ChatTemplate::parse(fixtures()["cases"].back()["template"], "", "</s>", "cfg.json");  // mistral uses bos_token
  });
  EXPECT_NE(nobos.find("needs bos_token"), std::string::npos) << nobos;
}

TEST(ChatTemplate, LoadsFromTokenizerConfigOrJinjaFile) {
  test::TempDir d;
  const std::string smol = fixtures()["cases"][0]["template"];
  const std::string dir = d.dir.string();
  EXPECT_FALSE(ChatTemplate::has_template(dir));
  auto e = error_of([&] { ChatTemplate::load(dir); });
  EXPECT_NE(e.find("has no chat template"), std::string::npos) << e;

  test::write_bytes(d.path("tokenizer_config.json"), json{{"bos_token", "<|im_start|>"}}.dump());
  e = error_of([&] { ChatTemplate::load(dir); });
  EXPECT_NE(e.find("has no chat template"), std::string::npos) << e;

  test::write_bytes(d.path("tokenizer_config.json"), json{{"chat_template", smol}}.dump());
  EXPECT_TRUE(ChatTemplate::has_template(dir));
  EXPECT_EQ(ChatTemplate::load(dir).name(), "chatml");

  json list = json::array({{{"name", "tool_use"}, {"template", "x"}}, {{"name", "default"}, {"template", smol}}});
  test::write_bytes(d.path("tokenizer_config.json"), json{{"chat_template", list}}.dump());
  EXPECT_EQ(ChatTemplate::load(dir).default_system(),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");

  list.erase(1);
  test::write_bytes(d.path("tokenizer_config.json"), json{{"chat_template", list}}.dump());
  e = error_of([&] { ChatTemplate::load(dir); });
  EXPECT_NE(e.find("without a \"default\" entry"), std::string::npos) << e;

  test::write_bytes(d.path("tokenizer_config.json"), json{{"chat_template", 42}}.dump());
  e = error_of([&] { ChatTemplate::load(dir); });
  EXPECT_NE(e.find("must be a string or a list"), std::string::npos) << e;

  test::write_bytes(d.path("tokenizer_config.json"), "{\"chat_template\": \"abc");
  e = error_of([&] { ChatTemplate::load(dir); });
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;

  test::write_bytes(d.path("tokenizer_config.json"), "{}");
  test::write_bytes(d.path("chat_template.jinja"), "{{ messages }} something else");
  e = error_of([&] { ChatTemplate::load(dir); });
  EXPECT_NE(e.find("chat_template.jinja: chat template not recognised"), std::string::npos) << e;
  test::write_bytes(d.path("chat_template.jinja"), smol);
  EXPECT_EQ(ChatTemplate::load(dir).name(), "chatml");
}

TEST(ChatTemplate, MessagesAreValidated) {
  EXPECT_NE(error_of([] { parse_chat_messages(json::array(), "x.jsonl:3"); }).find("x.jsonl:3: \"messages\" must be a non-empty"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_chat_messages(json::object(), "w"); }).find("non-empty array"), std::string::npos);
  EXPECT_NE(error_of([] { parse_chat_messages(json::parse(R"([{"role":"user"}])"), "w"); }).find("messages[0] must be"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_chat_messages(json::parse(R"([{"role":"user","content":5}])"), "w"); })
                .find("string \"role\" and \"content\""),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_chat_messages(json::parse(R"([{"role":"robot","content":"x"}])"), "w"); })
                .find("role 'robot'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_chat_messages(json::parse(R"([{"role":"user","content":"x"},{"role":"system","content":"y"}])"), "w");
            }).find("may only come first"),
            std::string::npos);
  EXPECT_EQ(parse_chat_messages(json::parse(R"([{"role":"user","content":"x","name":"n"}])"), "w").size(), 1u);
}

TEST(ModelPath, BareNameResolvesToTheCache) {
  test::TempDir d;
  const char* old = getenv("LOOKAHEAD_DEPS");
  const std::string saved = old ? old : "";
  setenv("LOOKAHEAD_DEPS", d.dir.string().c_str(), 1);
  std::filesystem::create_directories(d.dir / "models" / "Tiny");
  EXPECT_EQ(models_cache_dir(), d.path("models"));
  EXPECT_EQ(resolve_model_path("Tiny"), d.path("models") + "/Tiny");
  // NAME.gguf in the cache: found by NAME.gguf and by the bare NAME; a directory NAME wins over NAME.gguf.
  std::ofstream(d.dir / "models" / "Quant.gguf") << "GGUF";
  std::ofstream(d.dir / "models" / "Tiny.gguf") << "GGUF";
  EXPECT_EQ(resolve_model_path("Quant.gguf"), d.path("models") + "/Quant.gguf");
  EXPECT_EQ(resolve_model_path("Quant"), d.path("models") + "/Quant.gguf");
  EXPECT_EQ(resolve_model_path("Tiny"), d.path("models") + "/Tiny");
  EXPECT_EQ(resolve_model_path("random:tiny-gqa"), "random:tiny-gqa");
  EXPECT_EQ(resolve_model_path(d.dir.string()), d.dir.string());  // an existing directory is used as is
  EXPECT_EQ(resolve_model_path("no/such/dir"), "no/such/dir");     // a path: the loader names it
  const auto e = error_of([] { resolve_model_path("Missing-Model", "--draft-model"); });
  EXPECT_NE(e.find("--draft-model 'Missing-Model' not found"), std::string::npos) << e;
  EXPECT_NE(e.find(d.path("models") + "/Missing-Model"), std::string::npos) << e;
  EXPECT_NE(e.find("holds: Quant.gguf, Tiny, Tiny.gguf"), std::string::npos) << e;
  if (old) setenv("LOOKAHEAD_DEPS", saved.c_str(), 1);
  else unsetenv("LOOKAHEAD_DEPS");
}
