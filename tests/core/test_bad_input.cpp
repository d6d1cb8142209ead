// Bad input reaches a clear la::Error naming the problem (never a crash). This suite is libtorch-free so it also
// runs in the AddressSanitizer + UBSan build (launch/test.sh builds build-asan/ and runs the "core" label there).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "lookahead/decode/generator.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/io/prompt_records.h"
#include "lookahead/model/config.h"
#include "lookahead/model/safetensors.h"
#include "lookahead/tokenizer/tokenizer.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "common/expect_error.h"
#include "common/shared_data.h"
#include "common/temp_dir.h"

namespace fs = std::filesystem;
using namespace la;
using la::test::error_of;
using la::test::stories;

namespace {


// Copies the shared model into the test's temp dir so a test can corrupt one file.
void copy_model(const test::TempDir& d) {
  for (auto& e : fs::directory_iterator(stories())) fs::copy(e.path(), d.dir / e.path().filename());
}

std::string safetensors_bytes(const nlohmann::json& header, size_t body) {
  std::string h = header.dump();
  uint64_t n = h.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + h + std::string(body, '\0');
}

void load_and_check(const std::string& dir) {
  auto cfg = load_model_config(dir);
  auto ck = SafetensorsCheckpoint::open(dir);
  check_checkpoint(ck, cfg, dir);
}

}  // namespace

TEST(BadInput, MissingDirectory) {
  EXPECT_NE(error_of([] { load_model_config("/nonexistent/model"); }).find("does not exist"), std::string::npos);
}

TEST(BadInput, MissingConfig) {
  const test::TempDir d("la_bad");
  copy_model(d);
  fs::remove(d.dir / "config.json");
  EXPECT_NE(error_of([&] { load_model_config(d.dir.string()); }).find("no config.json"), std::string::npos);
}

TEST(BadInput, MissingWeights) {
  const test::TempDir d("la_bad");
  copy_model(d);
  fs::remove(d.dir / "model.safetensors");
  EXPECT_NE(error_of([&] { load_and_check(d.dir.string()); }).find("neither model.safetensors"), std::string::npos);
}

TEST(BadInput, HeaderLengthPastEndOfFile) {
  const test::TempDir d("la_bad");
  copy_model(d);
  std::string bytes(8, '\0');
  uint64_t n = 1ull << 40;
  std::memcpy(bytes.data(), &n, 8);
  test::write_bytes((d.dir / "model.safetensors").string(), bytes + "{}");
  const auto e = error_of([&] { load_and_check(d.dir.string()); });
  EXPECT_NE(e.find("header length"), std::string::npos) << e;
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
}

TEST(BadInput, TinyFile) {
  const test::TempDir d("la_bad");
  copy_model(d);
  test::write_bytes((d.dir / "model.safetensors").string(), "abc");
  EXPECT_NE(error_of([&] { load_and_check(d.dir.string()); }).find("not a safetensors file"), std::string::npos);
}

TEST(BadInput, BrokenHeaderJson) {
  const test::TempDir d("la_bad");
  copy_model(d);
  std::string h = "{\"a\": [1, 2";
  uint64_t n = h.size();
  test::write_bytes((d.dir / "model.safetensors").string(), std::string(reinterpret_cast<const char*>(&n), 8) + h);
  EXPECT_NE(error_of([&] { load_and_check(d.dir.string()); }).find("broken safetensors header JSON"), std::string::npos);
}

TEST(BadInput, TruncatedData) {
  const test::TempDir d("la_bad");
  copy_model(d);
  const auto p = d.dir / "model.safetensors";
  fs::resize_file(p, fs::file_size(p) - 1000);
  const auto e = error_of([&] { load_and_check(d.dir.string()); });
  EXPECT_NE(e.find("outside the file's data section"), std::string::npos) << e;
}

TEST(BadInput, UnsupportedTensorDtype) {
  const test::TempDir d("la_bad");
  copy_model(d);
  test::write_bytes((d.dir / "model.safetensors").string(),
                    safetensors_bytes({{"x", {{"dtype", "I64"}, {"shape", {2}}, {"data_offsets", {0, 16}}}}}, 16));
  const auto e = error_of([&] { SafetensorsCheckpoint::open(d.dir.string()); });
  EXPECT_NE(e.find("unsupported dtype I64"), std::string::npos) << e;
}

TEST(BadInput, DtypeSizeDisagreesWithBytes) {
  const test::TempDir d("la_bad");
  copy_model(d);
  test::write_bytes((d.dir / "model.safetensors").string(),
                    safetensors_bytes({{"x", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}}}, 8));
  const auto e = error_of([&] { SafetensorsCheckpoint::open(d.dir.string()); });
  EXPECT_NE(e.find("need 12"), std::string::npos) << e;
}

TEST(BadInput, ShapeDisagreesWithConfig) {
  const test::TempDir d("la_bad");
  copy_model(d);
  auto j = nlohmann::json::parse(read_file((d.dir / "config.json").string()));
  j["intermediate_size"] = 200;
  test::write_bytes((d.dir / "config.json").string(), j.dump());
  const auto e = error_of([&] { load_and_check(d.dir.string()); });
  EXPECT_NE(e.find("mlp.gate_proj.weight' has shape [172,64] but config.json implies [200,64]"), std::string::npos) << e;
}

TEST(BadInput, MissingTensor) {
  const test::TempDir d("la_bad");
  copy_model(d);
  auto j = nlohmann::json::parse(read_file((d.dir / "config.json").string()));
  j["tie_word_embeddings"] = false;
  test::write_bytes((d.dir / "config.json").string(), j.dump());
  EXPECT_NE(error_of([&] { load_and_check(d.dir.string()); }).find("'lm_head.weight' is missing"), std::string::npos);
}

TEST(BadInput, UnsupportedArchitecture) {
  const test::TempDir d("la_bad");
  copy_model(d);
  auto j = nlohmann::json::parse(read_file((d.dir / "config.json").string()));
  j["architectures"] = {"GPT2LMHeadModel"};
  test::write_bytes((d.dir / "config.json").string(), j.dump());
  EXPECT_NE(error_of([&] { load_model_config(d.dir.string()); }).find("unsupported architecture 'GPT2LMHeadModel'"),
            std::string::npos);
}

TEST(BadInput, BrokenConfigJson) {
  const test::TempDir d("la_bad");
  copy_model(d);
  test::write_bytes((d.dir / "config.json").string(), "{\"hidden_size\": ");
  EXPECT_NE(error_of([&] { load_model_config(d.dir.string()); }).find("invalid JSON"), std::string::npos);
}

TEST(BadInput, MissingConfigField) {
  const test::TempDir d("la_bad");
  copy_model(d);
  auto j = nlohmann::json::parse(read_file((d.dir / "config.json").string()));
  j.erase("hidden_size");
  test::write_bytes((d.dir / "config.json").string(), j.dump());
  EXPECT_NE(error_of([&] { load_model_config(d.dir.string()); }).find("'hidden_size'"), std::string::npos);
}

TEST(BadInput, HeadsNotMultipleOfKvHeads) {
  const test::TempDir d("la_bad");
  copy_model(d);
  auto j = nlohmann::json::parse(read_file((d.dir / "config.json").string()));
  j["num_key_value_heads"] = 3;
  test::write_bytes((d.dir / "config.json").string(), j.dump());
  EXPECT_NE(error_of([&] { load_model_config(d.dir.string()); }).find("not a multiple"), std::string::npos);
}

TEST(BadInput, MissingTokenizer) {
  const test::TempDir d("la_bad");
  copy_model(d);
  fs::remove(d.dir / "tokenizer.model");
  EXPECT_NE(error_of([&] { Tokenizer::load(d.dir.string(), 1); }).find("no tokenizer.model"), std::string::npos);
}

TEST(BadInput, CorruptTokenizer) {
  const test::TempDir d("la_bad");
  copy_model(d);
  test::write_bytes((d.dir / "tokenizer.model").string(), "this is not a sentencepiece model");
  EXPECT_NE(error_of([&] { Tokenizer::load(d.dir.string(), 1); }).find("cannot load tokenizer"), std::string::npos);
}

TEST(BadInput, PromptPlusNewTokensPastMaxPositions) {
  auto cfg = load_model_config(stories());  // 512 positions
  EXPECT_NE(error_of([&] { check_fits(cfg, 10, 600); }).find("exceeds the model's context"), std::string::npos);
  EXPECT_NE(error_of([&] { check_fits(cfg, 600, 0); }).find("context is 512"), std::string::npos);
  EXPECT_NE(error_of([&] { check_fits(cfg, 0, 10); }).find("empty prompt"), std::string::npos);
  EXPECT_EQ(error_of([&] { check_fits(cfg, 10, 503); }), "<no error>");
}

TEST(BadInput, InvalidStrategyParameters) {
  auto bad = [](auto f) {
    StrategyOptions o;
    f(o);
    return error_of([&] { o.validate(); });
  };
  EXPECT_NE(bad([](auto& o) { o.name = "beam"; }).find("invalid --strategy 'beam'"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.lade.window = 0; }).find("--window"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.lade.ngram = 1; }).find("--ngram"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.lade.guesses = -1; }).find("--guesses"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.trie.mode = "flat"; }).find("--trie-mode"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.name = "ouroboros"; }).find("--draft-model"), std::string::npos);
  EXPECT_EQ(bad([](auto&) {}), "<no error>");
}

// Each strategy's own check (validate_*_options, next to the strategy) refuses every bad value of its flags with
// an error naming that flag; StrategyOptions::validate (the CLI's call) and the strategy's factory refuse it too.
TEST(BadInput, EachStrategyRefusesItsBadValues) {
  using Validate = void (*)(const StrategyOptions&);
  using Make = std::unique_ptr<Strategy> (*)(const StrategyOptions&);
  struct Bad {
    Validate validate;
    Make make;  // null: the factory needs a draft model
    std::function<void(StrategyOptions&)> set;
    const char* flag;
  };
  const std::vector<Bad> cases = {
      {validate_jacobi_options, make_jacobi_strategy, [](auto& o) { o.jacobi.block = -1; }, "--jacobi-block"},
      {validate_jacobi_options, make_jacobi_strategy, [](auto& o) { o.jacobi.block = 513; }, "--jacobi-block"},
      {validate_lade_options, make_lade_strategy, [](auto& o) { o.lade.window = 0; }, "--window"},
      {validate_lade_options, make_lade_strategy, [](auto& o) { o.lade.window = 257; }, "--window"},
      {validate_lade_options, make_lade_strategy, [](auto& o) { o.lade.ngram = 1; }, "--ngram"},
      {validate_lade_options, make_lade_strategy, [](auto& o) { o.lade.ngram = 33; }, "--ngram"},
      {validate_lade_options, make_lade_strategy, [](auto& o) { o.lade.guesses = -1; }, "--guesses"},
      {validate_lade_options, make_lade_strategy, [](auto& o) { o.lade.guesses = 257; }, "--guesses"},
      {validate_trie_options, make_trie_strategy, [](auto& o) { o.trie.decoding_length = -1; }, "--decoding-length"},
      {validate_trie_options, make_trie_strategy, [](auto& o) { o.trie.decoding_length = 1025; }, "--decoding-length"},
      {validate_trie_options, make_trie_strategy, [](auto& o) { o.trie.branch_length = 0; }, "--branch-length"},
      {validate_trie_options, make_trie_strategy, [](auto& o) { o.trie.branch_length = 257; }, "--branch-length"},
      {validate_trie_options, make_trie_strategy, [](auto& o) { o.trie.capacity = -1; }, "--trie-capacity"},
      {validate_trie_options, make_trie_strategy, [](auto& o) { o.trie.mode = "flat"; }, "--trie-mode"},
      {validate_prompt_lookup_options, make_prompt_lookup_strategy, [](auto& o) { o.pl.min_ngram = 0; },
       "--pl-min-ngram"},
      {validate_prompt_lookup_options, make_prompt_lookup_strategy, [](auto& o) { o.pl.min_ngram = 65; },
       "--pl-min-ngram"},
      {validate_prompt_lookup_options, make_prompt_lookup_strategy, [](auto& o) { o.pl.max_ngram = 65; },
       "--pl-max-ngram"},
      {validate_prompt_lookup_options, make_prompt_lookup_strategy,
       [](auto& o) { o.pl.min_ngram = 5, o.pl.max_ngram = 4; }, "--pl-max-ngram"},
      {validate_prompt_lookup_options, make_prompt_lookup_strategy, [](auto& o) { o.pl.num_tokens = -1; },
       "--pl-num-tokens"},
      {validate_prompt_lookup_options, make_prompt_lookup_strategy, [](auto& o) { o.pl.num_tokens = 257; },
       "--pl-num-tokens"},
      {validate_ouroboros_options, nullptr, [](auto& o) { o.ouroboros.gamma = 0; }, "--gamma"},
      {validate_ouroboros_options, nullptr, [](auto& o) { o.ouroboros.gamma = 257; }, "--gamma"},
      {validate_ouroboros_options, nullptr, [](auto& o) { o.ouroboros.lade.window = 0; }, "--draft-window"},
      {validate_ouroboros_options, nullptr, [](auto& o) { o.ouroboros.lade.ngram = 1; }, "--draft-ngram"},
      {validate_ouroboros_options, nullptr, [](auto& o) { o.ouroboros.lade.guesses = -1; }, "--draft-guesses"},
      {validate_ouroboros_options, nullptr, [](auto& o) { o.ouroboros.extensions = 65; }, "--extensions"},
      {validate_ouroboros_options, nullptr, [](auto& o) { o.name = "ouroboros"; }, "--draft-model"},
      {validate_suffix_options, make_suffix_strategy, [](auto& o) { o.suffix.max_tokens = -1; },
       "--suffix-max-tokens"},
      {validate_suffix_options, make_suffix_strategy, [](auto& o) { o.suffix.max_tokens = 257; },
       "--suffix-max-tokens"},
      {validate_suffix_options, make_suffix_strategy, [](auto& o) { o.suffix.depth = 1; }, "--suffix-depth"},
      {validate_suffix_options, make_suffix_strategy, [](auto& o) { o.suffix.factor = 0; }, "--suffix-factor"},
      {validate_suffix_options, make_suffix_strategy, [](auto& o) { o.suffix.factor = NAN; }, "--suffix-factor"},
      {validate_suffix_options, make_suffix_strategy, [](auto& o) { o.suffix.min_prob = 1.5; }, "--suffix-min-prob"},
      {validate_suffix_options, make_suffix_strategy, [](auto& o) { o.suffix.global_mb = -1; },
       "--suffix-global-mb"},
  };
  for (const auto& c : cases) {
    StrategyOptions o;
    c.set(o);
    const std::string own = error_of([&] { c.validate(o); });
    EXPECT_NE(own.find(c.flag), std::string::npos) << c.flag << ": " << own;
    EXPECT_EQ(error_of([&] { o.validate(); }), own) << c.flag;
    if (c.make) {
      EXPECT_EQ(error_of([&] { c.make(o); }), own) << c.flag;
    }
  }
  // The defaults pass every check, and each strategy builds from them.
  const StrategyOptions good;
  for (const auto& e : strategy_registry()) {
    EXPECT_EQ(error_of([&] { e.validate(good); }), "<no error>") << e.name;
    if (std::string(e.name) == "ouroboros") continue;  // needs a draft model
    StrategyOptions o;
    o.name = e.name;
    std::unique_ptr<Strategy> made;
    EXPECT_EQ(error_of([&] { made = e.make(o, nullptr); }), "<no error>") << e.name;
    if (made) {
      EXPECT_EQ(made->name(), e.name);
    }
  }
}

// The registry is the one list of strategies: unique names, each found by name and named in the unknown-name
// error; every flag a row declares is unique across the table (the CLI binds them all).
TEST(BadInput, StrategyRegistryIsTheOneList) {
  struct Names final : StrategyFlags {
    std::vector<std::string> flags;
    void add(const std::string& f, int*, const std::string&) override { flags.push_back(f); }
    void add(const std::string& f, int64_t*, const std::string&) override { flags.push_back(f); }
    void add(const std::string& f, double*, const std::string&) override { flags.push_back(f); }
    void add(const std::string& f, std::string*, const std::string&) override { flags.push_back(f); }
    void add_switch(const std::string& f, bool*, const std::string&) override { flags.push_back(f); }
  } names;
  StrategyOptions o;
  o.name = "beam";
  const std::string unknown = error_of([&] { o.validate(); });
  std::set<std::string> seen;
  for (const auto& e : strategy_registry()) {
    EXPECT_TRUE(seen.insert(e.name).second) << e.name;
    EXPECT_EQ(find_strategy(e.name), &e);
    EXPECT_NE(unknown.find(e.name), std::string::npos) << unknown;
    EXPECT_GT(std::string(e.help).size(), 10u);
    e.flags(names, o);
  }
  EXPECT_EQ(find_strategy("beam"), nullptr);
  EXPECT_TRUE(seen.count("suffix"));
  const std::set<std::string> unique(names.flags.begin(), names.flags.end());
  EXPECT_EQ(unique.size(), names.flags.size());
  for (const char* f : {"window", "draft-window", "decoding-length", "pl-num-tokens", "suffix-state", "gamma"})
    EXPECT_TRUE(unique.count(f)) << f;
}

TEST(BadInput, UnknownPreset) {
  EXPECT_NE(error_of([] { preset_config("gpt-5"); }).find("unknown random model preset 'gpt-5'"), std::string::npos);
}

// A record's own generation settings: read as given, OpenAI's "max_tokens" as max_new_tokens, absent ones unset;
// a value of the wrong type or range is one error naming the line and the key (the CLI: test_cli_batch.sh).
TEST(BadInput, PromptRecordOwnSettings) {
  PromptRecord r;
  ASSERT_TRUE(parse_prompt_record(R"({"prompt": "x", "temperature": 0.5, "top_k": 3, "seed": 9, "answer": 1})", 0,
                                  "in:1", r));
  EXPECT_EQ(*r.gen.temperature, 0.5f);
  EXPECT_EQ(*r.gen.top_k, 3);
  EXPECT_EQ(*r.gen.seed, 9);
  EXPECT_FALSE(r.gen.max_new_tokens || r.gen.top_p);
  ASSERT_TRUE(parse_prompt_record(R"({"prompt": "x", "max_tokens": 12, "top_p": 1})", 0, "in:1", r));
  EXPECT_EQ(*r.gen.max_new_tokens, 12);
  EXPECT_EQ(*r.gen.top_p, 1.f);
  ASSERT_TRUE(parse_prompt_record(R"({"prompt": "x", "stop": "\n\n"})", 0, "in:1", r));
  EXPECT_EQ(*r.gen.stop, std::vector<std::string>{"\n\n"});
  ASSERT_TRUE(parse_prompt_record(R"({"prompt": "x", "stop": []})", 0, "in:1", r));  // none, whatever --stop says
  EXPECT_TRUE(r.gen.stop && r.gen.stop->empty());
  ASSERT_TRUE(parse_prompt_record(R"({"prompt": "x"})", 0, "in:1", r));
  EXPECT_FALSE(r.gen.any());
  for (const char* bad : {R"("temperature": -0.1)", R"("temperature": "hot")", R"("temperature": 1e300)",
                          R"("top_p": 1.5)", R"("top_k": -1)", R"("max_new_tokens": 4294967297)",
                          R"("seed": 18446744073709551615)", R"("max_new_tokens": 3, "max_tokens": 4)",
                          R"("stop": "")", R"("stop": ["a", 5])", R"("stop": {"a": 1})"}) {
    const std::string line = std::string(R"({"prompt": "x", )") + bad + "}";
    const std::string key = std::string(bad).substr(1, std::string(bad).find('"', 1) - 1);
    la::test::expect_error([&] { parse_prompt_record(line, 0, "in.jsonl:7", r); }, "in.jsonl:7", "\"" + key + "\"");
  }
}
