// What the parser fuzzing (tests/fuzz) found, as unit tests that also run in the ASan build: each input used to
// crash, hang, overflow or be silently misread, and must now be one la::Error naming the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "lookahead/model/config.h"
#include "lookahead/model/safetensors.h"
#include "lookahead/tokenizer/tokenizer_json.h"
#include "lookahead/util/error.h"
#include "lookahead/util/json_parse.h"
#include "lookahead/io/prompt_records.h"
#include "common/expect_error.h"
#include "common/temp_dir.h"

using namespace la;
using json = nlohmann::json;

namespace {

json stories_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64}, {"intermediate_size", 172},
          {"num_hidden_layers", 5}, {"num_attention_heads", 8}, {"num_key_value_heads", 4}, {"vocab_size", 512},
          {"max_position_embeddings", 512}, {"bos_token_id", 1}, {"eos_token_id", 2}};
}

json with(json j, const json& fields) {
  j.update(fields);
  return j;
}

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string config_error(const json& j, const std::string& gen = "") {
  try {
    parse_model_config(j.dump(), gen, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(FuzzFindings, JsonDepthLimit) {
  EXPECT_NO_THROW(parse_json(nested(kMaxJsonDepth)));
  EXPECT_THROW(parse_json(nested(kMaxJsonDepth + 1)), std::runtime_error);
  EXPECT_THROW(parse_json(nested(200000)), std::runtime_error);  // stack overflow when copied or dumped before
}

TEST(FuzzFindings, ConfigSizesBounded) {
  // 2e9 layers: expected_tensors ran out of memory; hidden x intermediate overflowed parameter_count.
  EXPECT_NE(config_error(with(stories_config(), {{"num_hidden_layers", 2000000000}})).find("num_hidden_layers"),
            std::string::npos);
  EXPECT_NE(config_error(with(stories_config(), {{"hidden_size", 2147483640}, {"intermediate_size", 2147483647}}))
                .find("beyond any supported model"),
            std::string::npos);
}

TEST(FuzzFindings, ConfigIntegersNotWrapped) {
  EXPECT_NE(config_error(with(stories_config(), {{"num_key_value_heads", 4294967304ull}})).find("num_key_value_heads"),
            std::string::npos);  // read as 8 before
  EXPECT_NE(config_error(with(stories_config(), {{"head_dim", 1e30}})).find("head_dim"), std::string::npos);
  EXPECT_NE(config_error(with(stories_config(), {{"eos_token_id", {4294967298ull}}})).find("eos_token_id"),
            std::string::npos);  // read as 2 before
  EXPECT_NE(config_error(with(stories_config(), {{"architectures", {1}}})).find("architectures"), std::string::npos);
  EXPECT_NE(config_error(stories_config(), R"({"bos_token_id": -4})").find("bos id -4"), std::string::npos);
  EXPECT_EQ(parse_model_config(with(stories_config(), {{"head_dim", 8.0}}).dump(), "", "c").head_dim, 8);
}

TEST(FuzzFindings, PromptIdsOutsideInt32) {
  PromptRecord r;
  EXPECT_THROW(parse_prompt_record(R"({"prompt_ids": [4294967297]})", 0, "in:1", r), Error);  // was id 1
  EXPECT_THROW(parse_prompt_record("{\"id\": " + nested(100000) + ", \"prompt\": \"x\"}", 0, "in:1", r), Error);
  ASSERT_TRUE(parse_prompt_record(R"({"prompt_ids": [2147483647, 0]})", 0, "in:1", r));
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2147483647, 0}));
}

TEST(FuzzFindings, SafetensorsNegativeDimension) {
  la::test::TempDir tmp;
  const std::string h = R"({"a":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]}})";
  std::string f(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(f.data(), &n, 8);
  la::test::write_bytes(tmp.path("m.safetensors"), f + h);
  SafetensorsCheckpoint ck;
  la::test::expect_error([&] { ck.add_file(tmp.path("m.safetensors")); }, "m.safetensors", "absurdly large");
}

TEST(FuzzFindings, TokenizerJsonDeepSequence) {
  std::string seq;
  for (int i = 0; i < 50000; ++i) seq += R"({"type":"Sequence","pretokenizers":[)";
  seq += R"({"type":"ByteLevel"})";
  for (int i = 0; i < 50000; ++i) seq += "]}";
  const std::string file = R"({"model":{"type":"BPE","vocab":{},"merges":[]},"pre_tokenizer":)" + seq + "}";
  la::test::expect_error([&] { parse_tokenizer_json(file, "tokenizer.json"); }, "tokenizer.json", "nesting deeper");
}
