// The GGUF reader and dequantizer (src/model/gguf.cpp, src/model/quant.cpp, src/model/gguf_model.cpp) on the
// known-answer file tests/core/data/gguf_fixture.gguf (tests/core/data/make_gguf_fixture.py: every metadata value
// type, and random blocks of every supported type with their values as the `gguf` package's numpy code
// dequantizes them), on truncated and corrupted copies of it, and on small files written here.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "lookahead/model/quant.h"
#include "lookahead/model/gguf.h"
#include "lookahead/model/gguf_model.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

std::string fixture_bytes() {
  std::ifstream f(std::string(LA_SOURCE_DIR) + "/tests/core/data/gguf_fixture.gguf", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

GgufFile parse(const std::string& b) { return GgufFile::parse(b.data(), b.size(), "test.gguf"); }

std::string error_of(const std::string& b) {
  try {
    parse(b);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gguf, ReadsEveryValueType) {
  const std::string b = fixture_bytes();
  ASSERT_GT(b.size(), 1000u);
  const GgufFile f = parse(b);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "fixture");
  EXPECT_EQ(f.get_int("t.u8", 0), 200);
  EXPECT_EQ(f.get_int("t.i8", 0), -7);
  EXPECT_EQ(f.get_int("t.u16", 0), 65000);
  EXPECT_EQ(f.get_int("t.i16", 0), -32000);
  EXPECT_EQ(f.get_int("t.u32", 0), 4000000000LL);
  EXPECT_EQ(f.get_int("t.i32", 0), -2000000000LL);
  EXPECT_EQ(f.get_float("t.f32", 0), 0.25);
  EXPECT_TRUE(f.get_bool("t.bool", false));
  EXPECT_EQ(f.get_string("t.str"), "h\xc3\xa9llo \xe2\x96\x81world");
  EXPECT_EQ(f.find("t.u64")->u, 18000000000000000000ULL);
  EXPECT_THROW(f.get_int("t.u64", 0), Error);  // beyond int64: refused, not wrapped
  EXPECT_EQ(f.get_int("t.i64", 0), -9000000000000000000LL);
  EXPECT_EQ(f.get_float("t.f64", 0), -1.5e300);
  EXPECT_EQ(f.find("t.arr_str")->strs, (std::vector<std::string>{"a", "", "\xc3\xbc"}));
  EXPECT_EQ(f.find("t.arr_i32")->ints, (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.find("t.arr_f32")->floats, (std::vector<double>{0.5, -0.25}));
  EXPECT_EQ(f.find("t.arr_bool")->ints, (std::vector<int64_t>{1, 0}));
  const GgufValue* aa = f.find("t.arr_arr");
  ASSERT_EQ(aa->items.size(), 2u);
  EXPECT_EQ(aa->items[0].ints, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(aa->items[1].ints, (std::vector<int64_t>{3}));
  EXPECT_THROW(f.get_string("t.u8"), Error);
  EXPECT_THROW(f.get_int("t.str", 0), Error);
}

TEST(Gguf, DequantizesEveryTypeBitForBitAsTheGgufPackage) {
  const std::string b = fixture_bytes();
  const GgufFile f = parse(b);
  int checked = 0;
  for (const char* name : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16"}) {
    const GgufTensor* q = f.tensor(std::string("q.") + name);
    const GgufTensor* e = f.tensor(std::string("expect.") + name);
    ASSERT_TRUE(q && e) << name;
    EXPECT_STREQ(qtype_name(q->type), name);
    ASSERT_EQ(q->ne, e->ne) << name;
    std::vector<float> got(static_cast<size_t>(q->numel()));
    dequantize_row(q->type, q->data, got.data(), q->numel());
    EXPECT_EQ(std::memcmp(got.data(), e->data, got.size() * 4), 0) << name << " differs from gguf.quants.dequantize";
    ++checked;
  }
  EXPECT_EQ(checked, 10);
}

// Every prefix of the file is refused with one la::Error that names the offset (or the truncated tensor), never
// a crash (the fuzz target fuzz_gguf does the same on random mutations).
TEST(Gguf, EveryTruncationIsOneClearError) {
  const std::string b = fixture_bytes();
  for (size_t n = 0; n < b.size(); n += (n < 2048 ? 1 : 97)) {
    const std::string e = error_of(b.substr(0, n));
    ASSERT_FALSE(e.empty()) << "a " << n << "-byte prefix was accepted";
    EXPECT_TRUE(e.find("offset") != std::string::npos || e.find("truncated") != std::string::npos) << e;
  }
}

TEST(Gguf, CorruptHeadersNameTheField) {
  const std::string b = fixture_bytes();
  auto with = [&](size_t off, const void* v, size_t n) {
    std::string c = b;
    std::memcpy(&c[off], v, n);
    return error_of(c);
  };
  EXPECT_NE(with(0, "GGUX", 4).find("not a GGUF file"), std::string::npos);
  uint32_t v1 = 1, vbig = 0x03000000, v9 = 9;
  EXPECT_NE(with(4, &v1, 4).find("version 1"), std::string::npos);
  EXPECT_NE(with(4, &vbig, 4).find("big-endian"), std::string::npos);
  EXPECT_NE(with(4, &v9, 4).find("unsupported GGUF version 9"), std::string::npos);
  uint64_t huge = uint64_t(1) << 60;
  EXPECT_NE(with(8, &huge, 8).find("tensor count"), std::string::npos);
  EXPECT_NE(with(16, &huge, 8).find("metadata count"), std::string::npos);
  // The first key's length (offset 24): a length past the end of the file.
  const std::string e = with(24, &huge, 8);
  EXPECT_NE(e.find("offset 24: metadata key 0: key of length"), std::string::npos) << e;
  // The first key's value type (after "general.architecture", 20 bytes): 99 is no type.
  uint32_t bad_type = 99;
  const std::string t = with(24 + 8 + 20, &bad_type, 4);
  EXPECT_NE(t.find("metadata key 0 ('general.architecture'): value type 99"), std::string::npos) << t;
}

// A small GGUF written field by field.
struct Writer {
  std::string kv, infos, data;
  uint64_t n_kv = 0, n_t = 0;
  template <class T>
  static void put(std::string& s, T v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
  static void str(std::string& s, const std::string& x) { put<uint64_t>(s, x.size()), s += x; }
  void key(const std::string& k, GgufKind t) { str(kv, k), put<uint32_t>(kv, uint32_t(t)), ++n_kv; }
  void u32(const std::string& k, uint32_t v) { key(k, GgufKind::U32), put(kv, v); }
  void f32(const std::string& k, float v) { key(k, GgufKind::F32), put(kv, v); }
  void s(const std::string& k, const std::string& v) { key(k, GgufKind::STRING), str(kv, v); }
  void tensor(const std::string& name, std::vector<uint64_t> ne) {  // F32, zero-filled
    str(infos, name);
    put<uint32_t>(infos, uint32_t(ne.size()));
    uint64_t n = 1;
    for (auto d : ne) put(infos, d), n *= d;
    put<uint32_t>(infos, 0);
    put<uint64_t>(infos, data.size());
    data.append(n * 4, '\0');
    while (data.size() % 32) data += '\0';
    ++n_t;
  }
  std::string bytes() const {
    std::string b = "GGUF";
    put<uint32_t>(b, 3), put(b, n_t), put(b, n_kv);
    b += kv + infos;
    while (b.size() % 32) b += '\0';
    return b + data;
  }
};

Writer tiny(const std::string& arch, bool gemma = false) {
  Writer w;
  w.s("general.architecture", arch);
  w.u32(arch + ".embedding_length", 16);
  w.u32(arch + ".block_count", 2);
  w.u32(arch + ".feed_forward_length", 32);
  w.u32(arch + ".attention.head_count", 4);
  w.u32(arch + ".attention.head_count_kv", 2);
  w.u32(arch + ".context_length", 64);
  w.f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.f32(arch + ".rope.freq_base", 5e5f);
  w.u32(arch + ".attention.sliding_window", 8);
  w.tensor("token_embd.weight", {16, 40});
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.tensor(p + "attn_norm.weight", {16});
    w.tensor(p + "attn_q.weight", {16, 16});
    w.tensor(p + "attn_k.weight", {16, 8});
    w.tensor(p + "attn_v.weight", {16, 8});
    w.tensor(p + "attn_output.weight", {16, 16});
    w.tensor(p + "ffn_norm.weight", {16});
    if (gemma) {
      w.tensor(p + "post_attention_norm.weight", {16});
      w.tensor(p + "post_ffw_norm.weight", {16});
      w.tensor(p + "attn_q_norm.weight", {4});
      w.tensor(p + "attn_k_norm.weight", {4});
    }
    w.tensor(p + "ffn_gate.weight", {16, 32});
    w.tensor(p + "ffn_up.weight", {16, 32});
    w.tensor(p + "ffn_down.weight", {32, 16});
  }
  w.tensor("output_norm.weight", {16});
  return w;
}

TEST(Gguf, ArchitectureMetadataBecomesTheModelConfig) {
  const std::string lb = tiny("llama").bytes();
  const ModelConfig l = gguf_model_config(parse(lb));
  EXPECT_EQ(l.architecture, "LlamaForCausalLM");
  EXPECT_EQ(l.hidden, 16);
  EXPECT_EQ(l.layers, 2);
  EXPECT_EQ(l.intermediate, 32);
  EXPECT_EQ(l.heads, 4);
  EXPECT_EQ(l.kv_heads, 2);
  EXPECT_EQ(l.head_dim, 4);
  EXPECT_EQ(l.vocab, 40);
  EXPECT_EQ(l.max_positions, 64);
  EXPECT_FLOAT_EQ(l.rope_theta, 5e5);
  EXPECT_TRUE(l.tie_word_embeddings);
  EXPECT_EQ(l.sliding_window, 0);  // Llama has none
  const GgufFile lf = parse(lb);  // the weights point into the file's tensor list
  const auto lw = gguf_weights(lf, l);
  for (const auto& w : lw) {
    const int want = w.name.find("q_proj") != std::string::npos ? 4 : w.name.find("k_proj") != std::string::npos ? 2 : 0;
    EXPECT_EQ(w.unpermute_heads, want) << w.name;
  }

  const std::string gb = tiny("gemma3", true).bytes();
  const GgufFile gf = parse(gb);
  const ModelConfig g = gguf_model_config(gf);
  EXPECT_EQ(g.architecture, "Gemma3ForCausalLM");
  EXPECT_TRUE(g.qk_norm && g.gemma_norms && g.sandwich_norms);
  EXPECT_EQ(g.hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(g.query_pre_attn_scalar, 4);
  EXPECT_EQ(g.sliding_window, 8);
  EXPECT_EQ(g.local_rope_theta, 10000);
  for (const auto& w : gguf_weights(gf, g)) {
    EXPECT_EQ(w.unpermute_heads, 0);  // only llama-architecture files are permuted
    const bool norm = w.name.find("norm.weight") != std::string::npos;
    EXPECT_EQ(w.minus_one, norm) << w.name;
  }
  // Gemma's norms come back as w = stored - 1 (the converter stored 1 + w).
  for (const auto& w : gguf_weights(gf, g))
    if (w.name == "model.norm.weight") {
      std::vector<float> v(16, 7.f);
      gguf_dequantize(w, v.data());
      EXPECT_EQ(v[0], -1.f);
    }

  Writer bad = tiny("mamba");
  EXPECT_THROW(gguf_model_config(parse(bad.bytes())), Error);
}

TEST(Gguf, UndoesTheLlamaRopePermutation) {
  // One head of 4 rows (half = 2): the converter stored HF rows [0, 2, 1, 3]; reading gives them back in order.
  Writer w;
  w.tensor("x", {2, 4});
  std::string b = w.bytes();
  GgufFile f = parse(b);
  GgufWeight g;
  g.tensor = &f.tensors()[0];
  g.unpermute_heads = 1;
  float* stored = reinterpret_cast<float*>(const_cast<uint8_t*>(g.tensor->data));
  const float hf_rows_stored[4] = {0, 2, 1, 3};  // file row r holds HF row hf_rows_stored[r]
  for (int r = 0; r < 4; ++r) stored[2 * r] = stored[2 * r + 1] = hf_rows_stored[r];
  std::vector<float> out(8);
  gguf_dequantize(g, out.data());
  for (int r = 0; r < 4; ++r) EXPECT_EQ(out[2 * r], float(r)) << r;
}

}  // namespace
}  // namespace la
