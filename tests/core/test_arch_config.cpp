// Architectures beyond Llama (Qwen3, Phi-3, Gemma-2/3, Mistral-Nemo): their released config.json files parse into
// the features the forward implements, the random: presets equal those configs, the expected tensor list follows
// each architecture's weight names, and bad configs give one error naming the field and the file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "lookahead/model/config.h"
#include "lookahead/model/safetensors.h"
#include "common/expect_error.h"
#include "common/temp_dir.h"

using namespace la;
using la::test::error_of;
using nlohmann::json;

namespace {

// The config.json files as released on the Hugging Face Hub (transformers 4.4x-4.5x era, as users have them).
const char* kQwen3 = R"({"architectures":["Qwen3ForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
 "bos_token_id":151643,"eos_token_id":151645,"head_dim":128,"hidden_act":"silu","hidden_size":1024,
 "initializer_range":0.02,"intermediate_size":3072,"max_position_embeddings":40960,"max_window_layers":28,
 "model_type":"qwen3","num_attention_heads":16,"num_hidden_layers":28,"num_key_value_heads":8,"rms_norm_eps":1e-06,
 "rope_scaling":null,"rope_theta":1000000,"sliding_window":null,"tie_word_embeddings":true,"torch_dtype":"bfloat16",
 "use_cache":true,"use_sliding_window":false,"vocab_size":151936})";
const char* kPhi3 = R"({"architectures":["Phi3ForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
 "bos_token_id":1,"embd_pdrop":0.0,"eos_token_id":32000,"hidden_act":"silu","hidden_size":3072,
 "initializer_range":0.02,"intermediate_size":8192,"max_position_embeddings":4096,"model_type":"phi3",
 "num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":32,"original_max_position_embeddings":4096,
 "pad_token_id":32000,"resid_pdrop":0.0,"rms_norm_eps":1e-05,"rope_scaling":null,"rope_theta":10000.0,
 "sliding_window":2047,"tie_word_embeddings":false,"torch_dtype":"bfloat16","use_cache":true,"vocab_size":32064})";
const char* kGemma2 = R"({"architectures":["Gemma2ForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
 "attn_logit_softcapping":50.0,"bos_token_id":2,"cache_implementation":"hybrid","eos_token_id":1,
 "final_logit_softcapping":30.0,"head_dim":256,"hidden_act":"gelu_pytorch_tanh",
 "hidden_activation":"gelu_pytorch_tanh","hidden_size":2304,"initializer_range":0.02,"intermediate_size":9216,
 "max_position_embeddings":8192,"model_type":"gemma2","num_attention_heads":8,"num_hidden_layers":26,
 "num_key_value_heads":4,"pad_token_id":0,"query_pre_attn_scalar":256,"rms_norm_eps":1e-06,"rope_theta":10000.0,
 "sliding_window":4096,"torch_dtype":"float32","vocab_size":256000})";
const char* kGemma3 = R"({"architectures":["Gemma3ForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
 "attn_logit_softcapping":null,"bos_token_id":2,"cache_implementation":"hybrid","eos_token_id":[1,106],
 "final_logit_softcapping":null,"head_dim":256,"hidden_activation":"gelu_pytorch_tanh","hidden_size":1152,
 "initializer_range":0.02,"intermediate_size":6912,"max_position_embeddings":32768,"model_type":"gemma3_text",
 "num_attention_heads":4,"num_hidden_layers":26,"num_key_value_heads":1,"pad_token_id":0,
 "query_pre_attn_scalar":256,"rms_norm_eps":1e-06,"rope_local_base_freq":10000,"rope_scaling":null,
 "rope_theta":1000000,"sliding_window":512,"sliding_window_pattern":6,"torch_dtype":"bfloat16","use_cache":true,
 "vocab_size":262144})";
const char* kNemo = R"({"architectures":["MistralForCausalLM"],"attention_dropout":0.0,"bos_token_id":1,
 "eos_token_id":2,"head_dim":128,"hidden_act":"silu","hidden_size":5120,"initializer_range":0.02,
 "intermediate_size":14336,"max_position_embeddings":1024000,"model_type":"mistral","num_attention_heads":32,
 "num_hidden_layers":40,"num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_theta":1000000.0,"sliding_window":null,
 "tie_word_embeddings":false,"torch_dtype":"bfloat16","vocab_size":131072})";

ModelConfig parse(const std::string& text) { return parse_model_config(text, "", "x/config.json"); }

std::string parse_error(json j) {
  return error_of([&] { parse(j.dump()); });
}

bool has_tensor(const ModelConfig& c, const std::string& name) {
  for (auto& [n, _] : expected_tensors(c))
    if (n == name) return true;
  return false;
}

void expect_same_model(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.intermediate, b.intermediate);
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.heads, b.heads);
  EXPECT_EQ(a.kv_heads, b.kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab, b.vocab);
  EXPECT_EQ(a.max_positions, b.max_positions);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rms_eps, b.rms_eps);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.fused_qkv, b.fused_qkv);
  EXPECT_EQ(a.rotary(), b.rotary());
  EXPECT_EQ(a.hidden_act, b.hidden_act);
  EXPECT_EQ(a.gemma_norms, b.gemma_norms);
  EXPECT_EQ(a.sandwich_norms, b.sandwich_norms);
  EXPECT_EQ(a.query_pre_attn_scalar, b.query_pre_attn_scalar);
  EXPECT_EQ(a.attn_softcap, b.attn_softcap);
  EXPECT_EQ(a.final_softcap, b.final_softcap);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.sliding_layers, b.sliding_layers);
  EXPECT_EQ(a.local_rope_theta, b.local_rope_theta);
  EXPECT_EQ(a.bos_id, b.bos_id);
  EXPECT_EQ(a.parameter_count(), b.parameter_count());
}

}  // namespace

TEST(ArchConfig, Qwen3HasQkNormsAndItsOwnHeadDim) {
  const auto c = parse(kQwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 128);  // 16 heads x 128 = 2048 != hidden 1024
  EXPECT_FALSE(c.any_sliding());  // use_sliding_window false
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(has_tensor(c, "model.layers.3.self_attn.q_norm.weight"));
  EXPECT_NEAR(static_cast<double>(c.parameter_count()), 596e6, 2e6);  // Qwen3-0.6B: 0.6B with tied embeddings
  expect_same_model(c, preset_config("qwen3-0.6b"));
  EXPECT_EQ(c.features(), "q/k norms");
}

TEST(ArchConfig, Phi3HasFusedProjectionsAndASlidingWindow) {
  auto c = parse(kPhi3);
  EXPECT_TRUE(c.fused_qkv);
  EXPECT_TRUE(has_tensor(c, "model.layers.0.self_attn.qkv_proj.weight"));
  EXPECT_TRUE(has_tensor(c, "model.layers.0.mlp.gate_up_proj.weight"));
  EXPECT_FALSE(has_tensor(c, "model.layers.0.self_attn.q_proj.weight"));
  EXPECT_EQ(c.sliding_window, 2047);
  for (int l = 0; l < c.layers; ++l) EXPECT_TRUE(c.is_sliding(l));
  EXPECT_NEAR(static_cast<double>(c.parameter_count()), 3.821e9, 5e6);
  expect_same_model(c, preset_config("phi-3-mini"));
  // partial_rotary_factor, top level (older) or inside rope_parameters (transformers 5).
  json j = json::parse(kPhi3);
  j["partial_rotary_factor"] = 0.75;
  EXPECT_EQ(parse(j.dump()).rotary(), 72);
  j.erase("partial_rotary_factor");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
  EXPECT_EQ(parse(j.dump()).rotary(), 48);
  j["rope_parameters"]["partial_rotary_factor"] = 0.01;  // int(96 * 0.01) = 0
  EXPECT_NE(parse_error(j).find("'partial_rotary_factor'"), std::string::npos);
  j["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 10000.0}};
  EXPECT_NE(parse_error(j).find("unsupported rope_scaling type 'longrope'"), std::string::npos);
}

TEST(ArchConfig, Gemma2HasSoftCapsSandwichNormsAndAlternatingWindows) {
  const auto c = parse(kGemma2);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(c.gemma_norms && c.sandwich_norms && !c.qk_norm);
  EXPECT_EQ(c.attn_softcap, 50.0);
  EXPECT_EQ(c.final_softcap, 30.0);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  EXPECT_TRUE(c.tie_word_embeddings);  // Gemma's default when the field is absent
  EXPECT_TRUE(c.is_sliding(0));
  EXPECT_FALSE(c.is_sliding(1));
  EXPECT_TRUE(c.is_sliding(24));
  EXPECT_FALSE(c.is_sliding(25));
  EXPECT_TRUE(has_tensor(c, "model.layers.1.pre_feedforward_layernorm.weight"));
  EXPECT_TRUE(has_tensor(c, "model.layers.1.post_feedforward_layernorm.weight"));
  EXPECT_NEAR(static_cast<double>(c.parameter_count()), 2.614e9, 5e6);
  expect_same_model(c, preset_config("gemma-2-2b"));
  // Absent soft-capping fields take Gemma-2's defaults; null turns them off.
  json j = json::parse(kGemma2);
  j.erase("attn_logit_softcapping");
  j["final_logit_softcapping"] = nullptr;
  const auto d = parse(j.dump());
  EXPECT_EQ(d.attn_softcap, 50.0);
  EXPECT_EQ(d.final_softcap, 0.0);
}

TEST(ArchConfig, Gemma3HasFiveLocalLayersPerGlobalOneWithTheirOwnRope) {
  const auto c = parse(kGemma3);
  EXPECT_TRUE(c.qk_norm && c.gemma_norms && c.sandwich_norms);
  EXPECT_EQ(c.attn_softcap, 0.0);
  EXPECT_EQ(c.final_softcap, 0.0);
  EXPECT_EQ(c.local_rope_theta, 1e4);
  EXPECT_EQ(c.rope_theta, 1e6);
  for (int l = 0; l < c.layers; ++l) EXPECT_EQ(c.is_sliding(l), (l + 1) % 6 != 0) << l;
  EXPECT_NEAR(static_cast<double>(c.parameter_count()), 999.9e6, 1e6);
  expect_same_model(c, preset_config("gemma-3-1b"));
  // transformers 5 writes layer_types and per-layer-type rope_parameters instead.
  json j = json::parse(kGemma3);
  j.erase("rope_theta");
  j.erase("rope_local_base_freq");
  j.erase("sliding_window_pattern");
  j["num_hidden_layers"] = 3;
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 12345.0}}}};
  const auto d = parse(j.dump());
  EXPECT_EQ(d.sliding_layers, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(d.rope_scaling.type, "linear");
  EXPECT_EQ(d.rope_scaling.factor, 8.0);
  EXPECT_EQ(d.local_rope_theta, 12345.0);
  j["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention"};
  EXPECT_NE(parse_error(j).find("'layer_types'[1] is 'chunked_attention'"), std::string::npos);
  j["layer_types"] = {"full_attention"};
  EXPECT_NE(parse_error(j).find("'layer_types' has 1 entries but num_hidden_layers is 3"), std::string::npos);
}

TEST(ArchConfig, MistralNemoHeadDimIndependentOfHidden) {
  const auto c = parse(kNemo);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.heads * c.head_dim, 4096);
  EXPECT_EQ(c.hidden, 5120);
  EXPECT_FALSE(c.any_sliding());
  EXPECT_EQ(c.features(), "");
  std::vector<int64_t> o;
  for (auto& [n, s] : expected_tensors(c))
    if (n == "model.layers.0.self_attn.o_proj.weight") o = s;
  EXPECT_EQ(o, (std::vector<int64_t>{5120, 4096}));
  EXPECT_NEAR(static_cast<double>(c.parameter_count()), 12.25e9, 0.05e9);
  expect_same_model(c, preset_config("mistral-nemo"));
  // Mistral-7B-v0.1's window applies to every layer.
  json j = json::parse(kNemo);
  j["sliding_window"] = 4096;
  const auto w = parse(j.dump());
  EXPECT_EQ(w.sliding_window, 4096);
  EXPECT_TRUE(w.is_sliding(0) && w.is_sliding(39));
}

TEST(ArchConfig, EveryPresetIsValid) {
  for (const auto& n : preset_names()) EXPECT_EQ(error_of([&] { preset_config(n).validate(); }), "<no error>") << n;
}

TEST(ArchConfigBadInput, UnknownArchitectureNamesFieldAndFile) {
  json j = json::parse(kQwen3);
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  const auto e = parse_error(j);
  EXPECT_NE(e.find("x/config.json: unsupported architecture 'Qwen3MoeForCausalLM' in field 'architectures'"),
            std::string::npos) << e;
  EXPECT_NE(e.find("Gemma3ForCausalLM"), std::string::npos) << e;  // the list of supported ones
}

TEST(ArchConfigBadInput, SoftCapNegativeOrNaN) {
  json j = json::parse(kGemma2);
  j["attn_logit_softcapping"] = -50.0;
  auto e = parse_error(j);
  EXPECT_NE(e.find("x/config.json: field 'attn_logit_softcapping' must be positive and finite"), std::string::npos)
      << e;
  j["attn_logit_softcapping"] = 0;
  EXPECT_NE(parse_error(j).find("'attn_logit_softcapping'"), std::string::npos);
  j["attn_logit_softcapping"] = "fifty";
  EXPECT_NE(parse_error(j).find("'attn_logit_softcapping' must be a number"), std::string::npos);
  j["attn_logit_softcapping"] = 50.0;
  // Python's json.dump writes float('nan') as a bare NaN, which is not JSON: the error still names the field.
  std::string text = j.dump();
  const std::string key = "\"final_logit_softcapping\":30.0";
  ASSERT_NE(text.find(key), std::string::npos);
  text.replace(text.find(key), key.size(), "\"final_logit_softcapping\": NaN");
  e = error_of([&] { parse(text); });
  EXPECT_NE(e.find("x/config.json: field 'final_logit_softcapping' is NaN"), std::string::npos) << e;
  text.replace(text.find("NaN"), 3, "-Infinity");
  e = error_of([&] { parse(text); });
  EXPECT_NE(e.find("field 'final_logit_softcapping' is NaN or infinite"), std::string::npos) << e;
  text.replace(text.find("-Infinity"), 9, "1e400");  // out of double range: read as inf
  e = error_of([&] { parse(text); });
  EXPECT_NE(e.find("final_logit_softcapping"), std::string::npos) << e;
  // Soft-capping on an architecture without it would be silently ignored: refused.
  json q = json::parse(kQwen3);
  q["final_logit_softcapping"] = 30.0;
  EXPECT_NE(parse_error(q).find("only supported for Gemma-2/3"), std::string::npos);
}

TEST(ArchConfigBadInput, SlidingWindowLargerThanContext) {
  json j = json::parse(kGemma3);
  j["sliding_window"] = 40000;
  auto e = parse_error(j);
  EXPECT_NE(e.find("x/config.json: field 'sliding_window' (40000) is larger than the context "
                   "(max_position_embeddings 32768)"),
            std::string::npos) << e;
  j["sliding_window"] = -1;
  EXPECT_NE(parse_error(j).find("field 'sliding_window' must be positive"), std::string::npos);
  // An inactive window (Qwen2.5's use_sliding_window false) is not checked, as transformers ignores it.
  json q = json::parse(kQwen3);
  q["sliding_window"] = 131072;
  EXPECT_EQ(parse_error(q), "<no error>");
  q["use_sliding_window"] = true;
  q["max_window_layers"] = 20;
  EXPECT_NE(parse_error(q).find("'sliding_window' (131072) is larger than the context"), std::string::npos);
  q["sliding_window"] = 4096;
  const auto c = parse(q.dump());
  EXPECT_FALSE(c.is_sliding(19));
  EXPECT_TRUE(c.is_sliding(20));
}

TEST(ArchConfigBadInput, ConfigContradictingWeightShapesNamesTheFields) {
  // A Qwen3 checkpoint whose config says head_dim 64 while the weights have 128: check_checkpoint names the
  // tensor, both shapes and the config fields the expected shape comes from.
  test::TempDir d;
  json j = json::parse(kQwen3);
  j["num_hidden_layers"] = 1;
  j["hidden_size"] = 32;
  j["intermediate_size"] = 16;
  j["vocab_size"] = 8;
  j["num_attention_heads"] = 2;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = 8;
  j["bos_token_id"] = 1;
  j["eos_token_id"] = 2;
  auto real = parse(j.dump());
  json header = json::object();
  size_t off = 0;
  for (auto& [n, s] : expected_tensors(real)) {
    size_t bytes = 4;
    for (auto x : s) bytes *= static_cast<size_t>(x);
    header[n] = {{"dtype", "F32"}, {"shape", s}, {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  std::string h = header.dump();
  uint64_t hl = h.size();
  test::write_bytes(d.path("model.safetensors"), std::string(reinterpret_cast<const char*>(&hl), 8) + h +
                                                     std::string(off, '\0'));
  auto ck = SafetensorsCheckpoint::open(d.dir.string());
  EXPECT_EQ(error_of([&] { check_checkpoint(ck, real, "m"); }), "<no error>");
  j["head_dim"] = 16;
  const auto e = error_of([&] { check_checkpoint(ck, parse(j.dump()), "m"); });
  EXPECT_NE(e.find("m: tensor 'model.layers.0.self_attn.q_proj.weight' has shape [16,32] but config.json implies "
                   "[32,32] (from hidden_size, num_attention_heads, num_key_value_heads, head_dim)"),
            std::string::npos) << e;
  // Config says Qwen3 (q/k norms) over a Qwen2-style checkpoint: the missing norm is named.
  json p = json::parse(j.dump());
  p["head_dim"] = 8;
  p["architectures"] = {"Gemma3ForCausalLM"};
  const auto e2 = error_of([&] { check_checkpoint(ck, parse(p.dump()), "m"); });
  EXPECT_NE(e2.find("m: tensor 'model.layers.0.pre_feedforward_layernorm.weight' is missing"), std::string::npos)
      << e2;
}
