// tokenizer.json on small hand-written files: byte-level BPE (merge ranks, added and special tokens, lstrip /
// rstrip / single_word, Digits, Split behaviours, NFC, invalid UTF-8, round trips, streaming), the SentencePiece-
// style pipelines (normalizers Replace / Prepend / Strip / Lowercase / NFKC, Metaspace with every prepend_scheme,
// decoders Replace / ByteFallback / Fuse / Strip / Metaspace, byte fallback in the model), and bad files (one
// la::Error each). The comparison with Hugging Face `tokenizers` on real data is tests/scripts/test_tokenizer_hf.sh.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cstdio>
#include <functional>
#include <random>

#include "../../src/tokenizer/hf_pipeline.h"   // the pre-tokenizer stage on its own, for the Split behaviours
#include "../../src/tokenizer/text_unicode.h"
#include "lookahead/tokenizer/tokenizer.h"
#include "lookahead/tokenizer/tokenizer_json.h"
#include "lookahead/util/error.h"
#include "common/expect_error.h"
#include "common/temp_dir.h"

using namespace la;
using json = nlohmann::json;

namespace {

// The GPT-2 byte-to-character table, written out independently of the library's.
std::string byte_level(const std::string& raw) {
  static std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const unsigned cp = keep ? b : 256 + n++;
      std::string s;
      if (cp < 0x80) s += char(cp);
      else s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
      t[b] = s;
    }
    return t;
  }();
  std::string out;
  for (unsigned char c : raw) out += table[c];
  return out;
}

using M = std::vector<std::pair<std::string, std::string>>;

// A byte-level BPE file: ids 0..255 are the bytes, then one id per merge result in order. Merges are given in
// raw text ("a b" means raw "a" + raw "b").
struct Fixture {
  json j;
  std::vector<std::pair<std::string, std::string>> merges;
  explicit Fixture(std::vector<std::pair<std::string, std::string>> m = {}) : merges(std::move(m)) {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_level(std::string(1, char(b)))] = b;
    json ms = json::array();
    int id = 256;
    for (auto& [a, c] : merges) {
      const std::string merged = byte_level(a + c);
      if (!vocab.contains(merged)) vocab[merged] = id++;
      ms.push_back(byte_level(a) + " " + byte_level(c));
    }
    j = {{"version", "1.0"},
         {"added_tokens", json::array()},
         {"normalizer", nullptr},
         {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
         {"post_processor", {{"type", "ByteLevel"}}},
         {"decoder", {{"type", "ByteLevel"}}},
         {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab}, {"merges", ms}}}};
  }
  int id(const std::string& raw) const { return j["model"]["vocab"][byte_level(raw)].get<int>(); }
  int add_token(const std::string& content, bool special, json extra = json::object()) {
    const int id = static_cast<int>(j["model"]["vocab"].size() + j["added_tokens"].size());
    json t = {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
              {"normalized", !special}, {"special", special}};
    for (auto& [k, v] : extra.items()) t[k] = v;
    j["added_tokens"].push_back(t);
    return id;
  }
  std::unique_ptr<Tokenizer> make(const HfTokenizerConfig& c = {}) const { return parse_tokenizer_json(j.dump(), "fixture", c); }
};

std::vector<int32_t> bytes_ids(const std::string& raw) {
  std::vector<int32_t> v;
  for (unsigned char c : raw) v.push_back(c);
  return v;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> pieces(const json& pre, const std::string& text) {
  hf::PreTokenizerChain chain(pre, "test");
  std::vector<std::string> out;
  chain.run(text, out);
  return out;
}

const std::vector<std::string> kTexts = {
    "Hello world", "  two  spaces\n\n\nnewlines\t\ttabs ", "don't we'll I'M", "x = 12345 + 6.78",
    "日本語のテキスト", "emoji 🙂👍🏽 and 🇯🇵", "e\u0301 vs \u00e9", "", " ", "\n", "a", "<|end|> inside text"};

}  // namespace

TEST(TokenizerJson, MergeRanksDecideTheSplit) {
  // "abc": with a+b ranked first the result is [ab, c]; with b+c first it is [a, bc].
  Fixture ab_first(M{{"a", "b"}, {"b", "c"}});
  Fixture bc_first(M{{"b", "c"}, {"a", "b"}});
  EXPECT_EQ(ab_first.make()->encode("abc"), (std::vector<int32_t>{ab_first.id("ab"), 'c'}));
  EXPECT_EQ(bc_first.make()->encode("abc"), (std::vector<int32_t>{'a', bc_first.id("bc")}));
  // A later merge of merged tokens applies once both sides exist; pieces never merge across a pre-token split.
  // In " abc" the pair " a" ranks after "a b", so the space stays alone.
  Fixture chain(M{{"a", "b"}, {"ab", "c"}, {" ", "a"}});
  EXPECT_EQ(chain.make()->encode("abc abc"), (std::vector<int32_t>{chain.id("abc"), ' ', chain.id("abc")}));
  EXPECT_EQ(chain.make()->encode(" ab"), (std::vector<int32_t>{' ', chain.id("ab")}));
  EXPECT_EQ(chain.make()->encode(" ac"), (std::vector<int32_t>{chain.id(" a"), 'c'}));
  // Repeated pairs merge left to right: "aaa" -> [aa, a].
  Fixture aa(M{{"a", "a"}});
  EXPECT_EQ(aa.make()->encode("aaa"), (std::vector<int32_t>{aa.id("aa"), 'a'}));
}

TEST(TokenizerJson, MergesAsArraysEqualMergesAsStrings) {
  Fixture f(M{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}});
  json arr = json::array();
  for (auto& [a, b] : f.merges) arr.push_back({byte_level(a), byte_level(b)});
  Fixture g = f;
  g.j["model"]["merges"] = arr;
  EXPECT_EQ(f.make()->encode("hello hell"), g.make()->encode("hello hell"));
  EXPECT_EQ(f.make()->encode("hello"), (std::vector<int32_t>{f.id("hello")}));
}

TEST(TokenizerJson, IgnoreMergesTakesWholeVocabularyPieces) {
  // "abc" is in the vocabulary but no merge sequence reaches it from [a, bc].
  Fixture f(M{{"b", "c"}});
  f.j["model"]["vocab"][byte_level("abc")] = 300;
  EXPECT_EQ(f.make()->encode("abc"), (std::vector<int32_t>{'a', f.id("bc")}));
  f.j["model"]["ignore_merges"] = true;
  EXPECT_EQ(f.make()->encode("abc"), (std::vector<int32_t>{300}));
}

TEST(TokenizerJson, SpecialTokensInsideTextAreNeverSplit) {
  Fixture f(M{{"<", "|"}});
  const int end = f.add_token("<|end|>", true);
  const int im = f.add_token("<|im_start|>", true);
  const int longer = f.add_token("<|end|>!", true);  // longest match wins
  auto t = f.make();
  EXPECT_EQ(t->encode("hi<|end|>there"), cat(cat(bytes_ids("hi"), {end}), bytes_ids("there")));
  EXPECT_EQ(t->encode("<|im_start|>user"), cat({im}, bytes_ids("user")));
  EXPECT_EQ(t->encode("x<|end|>!"), cat(bytes_ids("x"), {longer}));
  EXPECT_EQ(t->encode("<|end|><|end|>"), (std::vector<int32_t>{end, end}));
  // Not the whole token: plain bytes (with the "<|" merge).
  EXPECT_EQ(t->encode("<|en"), (std::vector<int32_t>{f.id("<|"), 'e', 'n'}));
  EXPECT_EQ(t->decode(t->encode("a<|end|>b")), "a<|end|>b");
}

TEST(TokenizerJson, LstripRstripAndSingleWord) {
  Fixture f;
  const int l = f.add_token("<L>", true, {{"lstrip", true}});
  const int r = f.add_token("<R>", true, {{"rstrip", true}});
  const int w = f.add_token("cat", false, {{"single_word", true}});
  auto t = f.make();
  EXPECT_EQ(t->encode("a  <L> b"), cat(cat(bytes_ids("a"), {l}), bytes_ids(" b")));
  EXPECT_EQ(t->encode("a <R> \n b"), cat(cat(bytes_ids("a "), {r}), bytes_ids("b")));
  EXPECT_EQ(t->encode("a cat b"), cat(cat(bytes_ids("a "), {w}), bytes_ids(" b")));
  EXPECT_EQ(t->encode("concat"), bytes_ids("concat"));  // inside a word: not a match
  EXPECT_EQ(t->encode("cats"), bytes_ids("cats"));
}

TEST(TokenizerJson, DigitsPreTokenizer) {
  Fixture f(M{{"1", "2"}, {"12", "3"}});
  auto plain = f.make();
  EXPECT_EQ(plain->encode("a123"), cat(bytes_ids("a"), {f.id("123")}));
  f.j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Digits"}, {"individual_digits", true}},
                            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  EXPECT_EQ(f.make()->encode("a123"), bytes_ids("a123"));
  EXPECT_EQ(pieces({{"type", "Digits"}, {"individual_digits", false}}, "Hey 123 friend!"),
            (std::vector<std::string>{"Hey ", "123", " friend!"}));
  EXPECT_EQ(pieces({{"type", "Digits"}, {"individual_digits", true}}, "Hey 123"),
            (std::vector<std::string>{"Hey ", "1", "2", "3"}));
}

TEST(TokenizerJson, SplitBehaviours) {
  auto split = [](const char* behavior, bool invert, const std::string& pattern_kind, const std::string& pattern) {
    return json{{"type", "Split"}, {"pattern", {{pattern_kind, pattern}}}, {"behavior", behavior}, {"invert", invert}};
  };
  const std::string s = "How are you doing?";
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(split("Removed", true, "Regex", R"(\w+|[^\w\s]+)"), s), (V{"How", "are", "you", "doing", "?"}));
  EXPECT_EQ(pieces(split("Isolated", true, "Regex", R"(\w+|[^\w\s]+)"), s),
            (V{"How", " ", "are", " ", "you", " ", "doing", "?"}));
  EXPECT_EQ(pieces(split("MergedWithPrevious", true, "Regex", R"(\w+|[^\w\s]+)"), s),
            (V{"How ", "are ", "you ", "doing", "?"}));
  EXPECT_EQ(pieces(split("MergedWithNext", true, "Regex", R"(\w+|[^\w\s]+)"), s),
            (V{"How", " are", " you", " doing", "?"}));
  EXPECT_EQ(pieces(split("Contiguous", true, "Regex", R"(\w+|[^\w\s]+)"), s),
            (V{"How", " ", "are", " ", "you", " ", "doing?"}));
  // A String pattern is literal (the dot and plus are not regex syntax).
  EXPECT_EQ(pieces(split("Removed", false, "String", ".+"), "a.+b.c"), (V{"a", "b.c"}));
  EXPECT_EQ(pieces(split("Removed", true, "String", "Hello"), "Hello Hello"), (V{"Hello", "Hello"}));
  // The Llama-3 pattern: case-insensitive contractions, at most three digits, lookahead for trailing spaces.
  const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(pieces(split("Isolated", false, "Regex", llama3), "I'M 12345  x\n\ny"),
            (V{"I", "'M", " ", "123", "45", " ", " x", "\n\n", "y"}));
}

TEST(TokenizerJson, ByteLevelPrefixSpaceAndGpt2Regex) {
  EXPECT_EQ(pieces({{"type", "ByteLevel"}, {"add_prefix_space", true}}, "hi"), (std::vector<std::string>{byte_level(" hi")}));
  EXPECT_EQ(pieces({{"type", "ByteLevel"}, {"add_prefix_space", false}}, "they're  ok"),
            (std::vector<std::string>{"they", byte_level("'re"), byte_level(" "), byte_level(" ok")}));
  EXPECT_EQ(pieces({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}, "a b"),
            (std::vector<std::string>{byte_level("a b")}));
  // Oniguruma's \s (what tokenizers compiles the pattern with) includes U+0085 but not U+001C or U+200B
  // (checked with tokenizers' pre_tokenize_str).
  const json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  EXPECT_EQ(pieces(bl, "!\u0085"), (std::vector<std::string>{"!", byte_level("\u0085")}));
  EXPECT_EQ(pieces(bl, "!\u00a0"), (std::vector<std::string>{"!", byte_level("\u00a0")}));
  EXPECT_EQ(pieces(bl, "!\x1c"), (std::vector<std::string>{byte_level("!\x1c")}));
  EXPECT_EQ(pieces(bl, "!\u200b"), (std::vector<std::string>{byte_level("!\u200b")}));
}

TEST(TokenizerJson, NfcNormalizer) {
  Fixture f;
  auto raw = f.make();
  EXPECT_NE(raw->encode("e\u0301"), raw->encode("\u00e9"));
  f.j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  auto nfc = f.make();
  EXPECT_EQ(nfc->encode("e\u0301"), nfc->encode("\u00e9"));
  EXPECT_EQ(nfc->encode("e\u0301"), bytes_ids("\u00e9"));
}

TEST(TokenizerJson, InvalidUtf8BecomesReplacementCharacters) {
  Fixture f;
  auto t = f.make();
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(t->encode("a\xFF" "b"), t->encode("a" + fffd + "b"));
  EXPECT_EQ(t->encode("\xE2\x82"), t->encode(fffd));                  // truncated 3-byte character: one U+FFFD
  EXPECT_EQ(t->encode("\xF0\x80\x80"), t->encode(fffd + fffd + fffd));  // overlong lead: one per byte
  EXPECT_EQ(t->encode("\xED\xA0\x80"), t->encode(fffd + fffd + fffd));  // surrogate
  EXPECT_EQ(t->encode(std::string("x\0y", 3)), bytes_ids(std::string("x\0y", 3)));
  EXPECT_EQ(t->decode(bytes_ids("\xC3")), fffd);  // an unfinished character decodes to U+FFFD
}

TEST(TokenizerJson, DecodeOfEncodeIsTheText) {
  Fixture f(M{{" ", "w"}, {"o", "r"}, {" w", "or"}, {"\xF0", "\x9F"}, {"\xF0\x9F", "\x99"}});
  f.add_token("<|end|>", true);
  auto t = f.make();
  for (const auto& s : kTexts) EXPECT_EQ(t->decode(t->encode(s)), s) << s;
}

TEST(TokenizerJson, StreamingEqualsOneShotDecode) {
  Fixture f(M{{" ", "w"}, {"\xF0", "\x9F"}, {"\xF0\x9F", "\x99"}, {"\xE6", "\x97"}, {"\xE6\x97", "\xA5"}});
  const int end = f.add_token("<|end|>", true);
  auto t = f.make();
  std::mt19937 rng(7);
  for (const auto& s : kTexts) {
    const auto ids = t->encode(s + "<|end|>" + s);
    for (int chunk : {1, 2, 3, 7}) {
      TextStream ts(*t, bytes_ids("prompt "));
      std::vector<int32_t> so_far;
      std::string streamed;
      for (size_t i = 0; i < ids.size();) {
        const size_t n = std::min<size_t>(ids.size() - i, chunk == 7 ? 1 + rng() % 7 : chunk);
        so_far.insert(so_far.end(), ids.begin() + i, ids.begin() + i + n);
        i += n;
        const std::string piece = ts.push(so_far);
        EXPECT_TRUE(text::utf8_valid(piece)) << s;  // never half a character
        streamed += piece;
      }
      streamed += ts.finish();
      EXPECT_EQ(streamed, t->decode(ids)) << s << " chunk " << chunk;
    }
  }
  // An emoji split over ids prints nothing until its last byte arrives; eos ids given as silent print nothing.
  const auto ids = bytes_ids("\xF0\x9F\x99\x82!");
  TextStream ts(*t, {}, {end});
  std::vector<int32_t> so_far;
  for (int i = 0; i < 3; ++i) {
    so_far.push_back(ids[i]);
    EXPECT_EQ(ts.push(so_far), "");
  }
  so_far.push_back(ids[3]);
  EXPECT_EQ(ts.push(so_far), "\xF0\x9F\x99\x82");
  so_far.push_back(end);
  EXPECT_EQ(ts.push(so_far), "");
  EXPECT_EQ(ts.finish(), "");
  // A character left unfinished at the end becomes U+FFFD when the stream finishes.
  TextStream cut(*t, {});
  EXPECT_EQ(cut.push(bytes_ids("a\xF0\x9F")), "a");
  EXPECT_EQ(cut.finish(), "\xEF\xBF\xBD");
}

TEST(TokenizerJson, SentencepieceStreamingMatchesWholeSequenceDecode) {
  // The incremental stream prints what decoding the whole sequence each time printed (the old TextStream).
  auto sp = Tokenizer::load(std::string(LA_SHARED_DIR) + "/models/stories260K", 1);
  std::mt19937 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    const auto prompt = sp->encode(trial % 2 ? "Once upon a time" : "Lily");
    std::vector<int32_t> gen;
    for (int i = 0; i < 30; ++i) gen.push_back(3 + static_cast<int32_t>(rng() % (sp->vocab_size() - 3)));
    const std::string base = sp->decode(prompt);
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), gen.begin(), gen.end());
    const std::string whole = sp->decode(all).substr(base.size());
    TextStream ts(*sp, prompt);
    std::string streamed;
    std::vector<int32_t> so_far;
    for (size_t i = 0; i < gen.size(); i += 1 + trial % 3) {
      so_far.assign(gen.begin(), gen.begin() + std::min(gen.size(), i + 1 + trial % 3));
      streamed += ts.push(so_far);
    }
    streamed += ts.finish();
    EXPECT_EQ(streamed, whole) << "trial " << trial;
  }
}

TEST(TokenizerJson, TemplateBosAndTokenizerConfig) {
  Fixture f;
  const int bos = f.add_token("<|begin_of_text|>", true);
  f.j["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [],
       "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [256], "tokens": ["<|begin_of_text|>"]}}}]})");
  ASSERT_EQ(bos, 256);
  EXPECT_EQ(f.make()->encode("hi"), cat({bos}, bytes_ids("hi")));
  EXPECT_EQ(f.make()->encode(""), (std::vector<int32_t>{bos}));
  HfTokenizerConfig off;
  off.add_bos = 0;
  off.bos_token = "<|begin_of_text|>";
  EXPECT_EQ(f.make(off)->encode("hi"), bytes_ids("hi"));
  Fixture g;  // no template: add_bos_token adds the model's BOS (or bos_token's id)
  HfTokenizerConfig on;
  on.add_bos = 1;
  on.model_bos_id = 7;
  EXPECT_EQ(g.make(on)->encode("hi"), cat({7}, bytes_ids("hi")));
  EXPECT_EQ(g.make()->encode("hi"), bytes_ids("hi"));
}

TEST(TokenizerJson, LoadPicksTheTokenizerOfTheDirectory) {
  test::TempDir d("la_tok");
  Fixture f;
  const int bos = f.add_token("<s>", true);
  test::write_bytes(d.path("tokenizer.json"), f.j.dump());
  auto t = Tokenizer::load(d.dir.string(), -1);
  EXPECT_NE(t->kind().find("tokenizer.json"), std::string::npos);
  EXPECT_EQ(t->encode("ab"), bytes_ids("ab"));
  test::write_bytes(d.path("tokenizer_config.json"), R"({"add_bos_token": true, "bos_token": {"content": "<s>"}})");
  EXPECT_EQ(Tokenizer::load(d.dir.string(), 99)->encode("ab"), cat({bos}, bytes_ids("ab")));
  test::write_bytes(d.path("tokenizer_config.json"), "{ not json");
  test::expect_error([&] { Tokenizer::load(d.dir.string(), 1); }, "tokenizer_config.json", "invalid JSON");
  // With a tokenizer.model beside it, sentencepiece is used as before.
  test::write_bytes(d.path("tokenizer_config.json"), "{}");
  test::write_bytes(d.path("tokenizer.model"),
                    test::read_bytes(std::string(LA_SHARED_DIR) + "/models/stories260K/tokenizer.model"));
  EXPECT_EQ(Tokenizer::load(d.dir.string(), 1)->kind(), "sentencepiece");
  test::TempDir empty("la_tok_empty");
  test::expect_error([&] { Tokenizer::load(empty.dir.string(), 1); }, empty.dir.string(),
                     "no tokenizer.model or tokenizer.json");
}

TEST(TokenizerJson, BadFilesGiveOneClearError) {
  Fixture good(M{{"a", "b"}});
  const std::string text = good.j.dump();
  auto expect_bad = [](const std::string& s, const std::string& part) {
    test::expect_error([&] { parse_tokenizer_json(s, "bad.json"); }, "bad.json", part);
  };
  expect_bad("{\"model\": ", "invalid JSON");
  expect_bad(text.substr(0, text.size() / 2), "invalid JSON");  // truncated
  expect_bad("[1, 2]", "not a JSON object");
  auto with = [&](auto edit) {
    json j = good.j;
    edit(j);
    return j.dump();
  };
  expect_bad(with([](json& j) { j["model"]["type"] = "WordPiece"; }), "unsupported tokenizer model type 'WordPiece'");
  expect_bad(with([](json& j) { j["model"] = {{"type", "Unigram"}, {"vocab", json::array()}}; }),
             "unsupported tokenizer model type 'Unigram'");
  expect_bad(with([](json& j) { j["model"]["merges"].push_back("a zz"); }), "'zz', which is not in the vocabulary");
  expect_bad(with([](json& j) { j["model"]["merges"].push_back("b c"); }), "makes 'bc'");
  expect_bad(with([](json& j) { j["model"]["merges"].push_back("abc"); }), "not two tokens");
  expect_bad(with([](json& j) { j["model"]["merges"].push_back(json::array({"a"})); }), "neither");
  expect_bad(with([](json& j) { j["model"]["vocab"]["x"] = -4; }), "must be a token id");
  expect_bad(with([](json& j) { j["model"]["vocab"]["x"] = 2000000000; }), "far beyond");
  expect_bad(with([](json& j) { j["model"].erase("vocab"); }), "no \"vocab\"");
  expect_bad(with([](json& j) { j.erase("model"); }), "no \"model\"");
  expect_bad(with([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }), "continuing_subword_prefix");
  expect_bad(with([](json& j) { j["model"]["dropout"] = 0.1; }), "dropout");
  expect_bad(with([](json& j) {
               j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}, {"invert", false}};
             }),
             "invalid regex '(unclosed'");
  expect_bad(with([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }), "unsupported pre-tokenizer 'Whitespace'");
  expect_bad(with([](json& j) { j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}}; }),
             "unsupported pre-tokenizer 'BertPreTokenizer'");
  expect_bad(with([](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}}; }),
             "\"replacement\" must be one character");
  expect_bad(with([](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}}; }),
             "unsupported Metaspace prepend_scheme 'sometimes'");
  expect_bad(with([](json& j) {
               j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}, {"invert", false}};
             }),
             "unsupported Split behavior 'Sideways'");
  expect_bad(with([](json& j) { j["normalizer"] = {{"type", "BertNormalizer"}}; }), "unsupported normalizer 'BertNormalizer'");
  expect_bad(with([](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AA=="}}; }),
             "unsupported normalizer 'Precompiled'");
  expect_bad(with([](json& j) { j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}}; }),
             "Replace normalizer needs a string \"content\"");
  expect_bad(with([](json& j) { j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "("}}}, {"content", ""}}; }),
             "invalid regex '('");
  expect_bad(with([](json& j) { j["normalizer"] = {{"type", "Prepend"}}; }), "Prepend normalizer needs a string");
  expect_bad(with([](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }), "unsupported decoder 'WordPiece'");
  expect_bad(with([](json& j) { j["decoder"] = {{"type", "CTC"}}; }), "unsupported decoder 'CTC'");
  expect_bad(with([](json& j) { j["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", -1}, {"stop", 0}}; }),
             "\"start\" must be a non-negative integer");
  expect_bad(with([](json& j) { j["decoder"] = {{"type", "Sequence"}, {"decoders", 3}}; }), "\"decoders\" array");
  expect_bad(with([](json& j) { j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<x>"}}}}}}}; }),
             "without its ids");
  expect_bad(with([](json& j) { j["post_processor"] = {{"type", "Mystery"}}; }), "unsupported post_processor 'Mystery'");
  expect_bad(with([](json& j) { j["added_tokens"] = {{{"id", 1}}}; }), "string \"content\"");
  expect_bad(with([](json& j) { j["added_tokens"] = 5; }), "\"added_tokens\" must be an array");
  expect_bad(with([](json& j) { j["pre_tokenizer"]["add_prefix_space"] = "yes"; }), "true or false");
  // Deep nesting is refused by the JSON reader (64 levels) before the pipeline's own depth check.
  expect_bad(with([](json& j) {
               for (int i = 0; i < 100; ++i) j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {j["pre_tokenizer"]}}};
             }),
             "nest");
}

TEST(TokenizerJson, EveryTruncationIsAnErrorNotACrash) {
  Fixture f(M{{"a", "b"}, {"ab", "c"}});
  f.add_token("<|end|>", true);
  const std::string text = f.j.dump();
  for (size_t n = 0; n < text.size(); n += 1 + n / 40) {
    try {
      parse_tokenizer_json(text.substr(0, n), "cut");
      ADD_FAILURE() << "a file cut at " << n << " bytes parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut"), std::string::npos);
    }
  }
}

TEST(TokenizerJson, RandomBytesRoundTripAfterRepair) {
  // Any input: no crash (also under ASan/UBSan), and the text comes back with ill-formed UTF-8 replaced.
  Fixture f(M{{"<", "|"}, {" ", "t"}, {"\xC3", "\xA9"}, {"1", "2"}});
  f.add_token("<|end|>", true);  // (no lstrip/rstrip here: they drop whitespace by design)
  f.add_token("word", false, {{"single_word", true}});
  f.j["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": false},
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|\\p{L}+|\\s+(?!\\S)|\\s+"}, "behavior": "MergedWithNext", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]})");
  auto t = f.make();
  std::mt19937 rng(11);
  const std::string alphabet[] = {"a", " ", "\n", "1", "<|end|>", "<|", "word", "'S", "\xC3", "\xA9", "\xF0\x9F\x99\x82",
                                  "\xFF", "\x80", "\xE2\x82", "\t", "\xCC\x81"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string s;
    for (int i = 0, n = rng() % 24; i < n; ++i) s += alphabet[rng() % std::size(alphabet)];
    const auto ids = t->encode(s);
    EXPECT_EQ(t->decode(ids), text::utf8_repair(s)) << trial;
  }
}

// ---- SentencePiece-style pipelines (Llama-2, Mistral, Gemma): every expected value below was produced by Hugging
// Face tokenizers 0.23.3 on the same JSON (normalize_str, pre_tokenize_str, decoder.decode, encode().ids).
namespace {

const std::string kMeta = "\u2581";  // ▁

// <unk> <s> </s>, the 256 byte tokens <0x00>..<0xFF> (ids 3..258), then ▁ a b h i hi ▁hi ab ▁a ▁ab (259..268).
json sp_fixture() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  for (const std::string& t : {kMeta, std::string("a"), std::string("b"), std::string("h"), std::string("i"),
                              std::string("hi"), kMeta + "hi", std::string("ab"), kMeta + "a", kMeta + "ab"})
    vocab[t] = static_cast<int>(vocab.size());
  json added = json::array();
  for (int i = 0; i < 3; ++i)
    added.push_back({{"id", i}, {"content", std::vector<std::string>{"<unk>", "<s>", "</s>"}[i]}, {"special", true},
                     {"normalized", false}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", true}, {"vocab", vocab},
            {"merges", json::array({json::array({"h", "i"}), json::array({kMeta, "hi"}), json::array({"a", "b"}),
                                    json::array({kMeta, "a"}), json::array({kMeta + "a", "b"})})}}}};
}

json replace(const std::string& kind, const std::string& pattern, const std::string& content) {
  return {{"type", "Replace"}, {"pattern", {{kind, pattern}}}, {"content", content}};
}

std::string normalize(const json& n, const std::string& s) { return hf::NormalizerChain(n, "test").apply(s); }

std::string decode_tokens(const json& d, std::vector<std::string> tokens) {
  return hf::DecoderChain(d, "test").decode(std::move(tokens));
}

std::unique_ptr<Tokenizer> sp_tokenizer(const std::function<void(json&)>& edit) {
  json j = sp_fixture();
  edit(j);
  return parse_tokenizer_json(j.dump(), "sp-fixture");
}

using Ids = std::vector<int32_t>;
using V = std::vector<std::string>;

}  // namespace

TEST(TokenizerJsonPipeline, ReplaceNormalizer) {
  EXPECT_EQ(normalize(replace("String", " ", kMeta), " a  b "), kMeta + "a" + kMeta + kMeta + "b" + kMeta);
  EXPECT_EQ(normalize(replace("Regex", R"(\s+)", " "), "a \t\n b"), "a b");
  EXPECT_EQ(normalize(replace("String", "ab", ""), "abcab"), "c");
  EXPECT_EQ(normalize(replace("String", ".", "!"), "a.b"), "a!b");  // a String pattern is literal
}

TEST(TokenizerJsonPipeline, PrependStripLowercaseNfkcNormalizers) {
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", kMeta}}, "x"), kMeta + "x");
  EXPECT_EQ(normalize({{"type", "Prepend"}, {"prepend", kMeta}}, ""), "");  // never onto an empty text
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, " \t a b \u3000\n"), "a b");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, "  a "), "a ");
  EXPECT_EQ(normalize({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}, "  a "), "  a");
  // Character by character (Rust's char::to_lowercase): U+0130 gains a combining dot, no final sigma.
  EXPECT_EQ(normalize({{"type", "Lowercase"}}, "\u00c0B \u0130 \u03a3\u0391\u03a3 \u01c5 \u1e9e"),
            "\u00e0b i\u0307 \u03c3\u03b1\u03c3 \u01c6 \u00df");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\uff46\uff49\u2460 \ufb01 \u3300"), "fi1 fi \u30a2\u30d1\u30fc\u30c8");
  const json seq = {{"type", "Sequence"},
                    {"normalizers",
                     {{{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
                      {{"type", "Lowercase"}},
                      {{"type", "NFKC"}},
                      replace("String", " ", kMeta),
                      {{"type", "Prepend"}, {"prepend", kMeta}}}}};
  EXPECT_EQ(normalize(seq, "  \uff28\uff25\uff2c\uff2c\uff2f World  "), kMeta + "hello" + kMeta + "world");
}

TEST(TokenizerJsonPipeline, MetaspacePreTokenizer) {
  auto meta = [](const char* scheme, bool split) {
    return json{{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", scheme}, {"split", split}};
  };
  EXPECT_EQ(pieces(meta("always", true), "Hey  friend "), (V{kMeta + "Hey", kMeta, kMeta + "friend", kMeta}));
  EXPECT_EQ(pieces(meta("always", false), "Hey friend"), (V{kMeta + "Hey" + kMeta + "friend"}));
  EXPECT_EQ(pieces(meta("never", true), "Hey friend"), (V{"Hey", kMeta + "friend"}));
  EXPECT_EQ(pieces(meta("first", true), "Hey friend"), (V{kMeta + "Hey", kMeta + "friend"}));
  // "first" prepends only at the start of the input, "always" to every piece.
  hf::PreTokenizerChain first(meta("first", true), "test"), always(meta("always", true), "test");
  V out;
  first.run("hi", out, /*at_origin=*/false);
  EXPECT_EQ(out, V{"hi"});
  out.clear();
  always.run("hi", out, false);
  EXPECT_EQ(out, V{kMeta + "hi"});
  // Files written before prepend_scheme existed: add_prefix_space.
  EXPECT_EQ(pieces({{"type", "Metaspace"}, {"replacement", kMeta}, {"add_prefix_space", false}}, "a b"), (V{"a", kMeta + "b"}));
  EXPECT_EQ(pieces(meta("always", true), ""), V{});
}

TEST(TokenizerJsonPipeline, SplitWithStringPatternEveryBehaviour) {
  auto split = [](const char* behavior, bool invert) {
    return json{{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", behavior}, {"invert", invert}};
  };
  EXPECT_EQ(pieces(split("MergedWithPrevious", false), "a  b c "), (V{"a ", " ", "b ", "c "}));
  EXPECT_EQ(pieces(split("MergedWithNext", false), "a  b c "), (V{"a", " ", " b", " c", " "}));
  EXPECT_EQ(pieces(split("Contiguous", false), "a  b c "), (V{"a", "  ", "b", " ", "c", " "}));
  EXPECT_EQ(pieces(split("Removed", true), "a  b c "), (V{" ", " ", " ", " "}));
  EXPECT_EQ(pieces(split("Isolated", false), "a b"), (V{"a", " ", "b"}));
}

TEST(TokenizerJsonPipeline, EveryDecoder) {
  EXPECT_EQ(decode_tokens(replace("String", kMeta, " "), {kMeta + "a", "b" + kMeta + kMeta, "c"}), " ab  c");
  // ByteFallback: a run of byte tokens that is not valid UTF-8 becomes one U+FFFD per byte token, the whole run.
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(decode_tokens({{"type", "ByteFallback"}},
                          {"a", "<0xE6>", "<0x97>", "<0xA5>", "<0xE6>", "<0x97>", "b", "<0xff>", "<0x4>", "<0x41>"}),
            "a" + r + r + r + r + r + "b" + r + "<0x4>A");
  EXPECT_EQ(decode_tokens({{"type", "ByteFallback"}}, {"<0xE6>", "<0x97>", "<0xA5>"}), "\u65e5");
  EXPECT_EQ(decode_tokens({{"type", "Fuse"}}, {"a", " b", "c"}), "a bc");
  EXPECT_EQ(decode_tokens({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}}, {"  a  ", "  ", "b "}), " a b");
  EXPECT_EQ(decode_tokens({{"type", "Strip"}, {"content", "x"}, {"start", 2}, {"stop", 0}}, {"xxxa", "x"}), "xa");
  const json ms = {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(decode_tokens(ms, {kMeta + "Hey", kMeta + "friend", kMeta + kMeta}), "Hey friend  ");
  EXPECT_EQ(decode_tokens({{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "never"}},
                          {kMeta + "Hey", kMeta + "friend"}),
            " Hey friend");
  EXPECT_EQ(decode_tokens({{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "first"}}, {"_a_b", "_c"}), "ab c");
  EXPECT_EQ(decode_tokens({{"type", "ByteLevel"}}, {byte_level(" hi"), byte_level(" \xF0\x9F"), byte_level("\x99"), byte_level("\x82")}),
            " hi \U0001F642");
  const json llama = {{"type", "Sequence"},
                      {"decoders",
                       {replace("String", kMeta, " "),
                        {{"type", "ByteFallback"}},
                        {{"type", "Fuse"}},
                        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(decode_tokens(llama, {kMeta + "hi", kMeta, "<0xC3>", "<0xA9>", kMeta, "<0xC3>"}), "hi \u00e9 " + r);
  EXPECT_EQ(decode_tokens(nullptr, {"a", "b"}), "a b");  // no decoder: tokenizers joins the tokens with spaces
}

TEST(TokenizerJsonPipeline, Llama2LegacyPipeline) {
  auto t = sp_tokenizer([](json& j) {
    j["normalizer"] = {{"type", "Sequence"},
                       {"normalizers", {{{"type", "Prepend"}, {"prepend", kMeta}}, replace("String", " ", kMeta)}}};
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {replace("String", kMeta, " "),
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
    j["post_processor"] = {{"type", "TemplateProcessing"},
                           {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                           {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  });
  EXPECT_EQ(t->kind(), "tokenizer.json (BPE)");
  EXPECT_EQ(t->encode("hi ab"), (Ids{1, 265, 259, 266}));
  EXPECT_EQ(t->encode(" hi"), (Ids{1, 259, 265}));
  EXPECT_EQ(t->encode("hi  ab "), (Ids{1, 265, 259, 259, 266, 259}));
  EXPECT_EQ(t->encode("ab\u00e9z"), (Ids{1, 259, 266, 198, 172, 125}));  // é and z by byte fallback
  EXPECT_EQ(t->encode(""), (Ids{1}));
  EXPECT_EQ(t->encode("<s>hi ab"), (Ids{1, 1, 265, 259, 266}));
  EXPECT_EQ(t->encode("hi</s>ab"), (Ids{1, 265, 2, 259, 266}));
  EXPECT_EQ(t->encode("\U0001F642 hi"), (Ids{1, 259, 243, 162, 156, 133, 265}));
  EXPECT_EQ(t->decode({1, 265, 259, 266}), "<s> hi ab");
  EXPECT_EQ(t->decode({1, 259, 265}), "<s>  hi");
  EXPECT_EQ(t->decode({265, 259, 266}), "hi ab");  // the Strip decoder drops the prepended space
  EXPECT_EQ(t->decode({1, 259, 243, 162, 156, 133, 265}), "<s> \U0001F642 hi");
  EXPECT_FALSE(t->bytes_per_id());
}

TEST(TokenizerJsonPipeline, GemmaPipeline) {
  auto t = sp_tokenizer([](json& j) {
    j["normalizer"] = replace("String", " ", kMeta);
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders", {replace("String", kMeta, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  });
  EXPECT_EQ(t->encode("hi ab"), (Ids{264, 259, 266}));
  EXPECT_EQ(t->encode(" hi"), (Ids{265}));
  EXPECT_EQ(t->encode("hi  ab "), (Ids{264, 259, 259, 266, 259}));
  EXPECT_EQ(t->encode("ab\u00e9z"), (Ids{266, 198, 172, 125}));
  EXPECT_EQ(t->encode(""), Ids{});
  EXPECT_EQ(t->encode("<s>hi ab"), (Ids{1, 264, 259, 266}));
  EXPECT_EQ(t->encode("\U0001F642 hi"), (Ids{243, 162, 156, 133, 265}));
  for (const std::string s : {"hi ab", " hi", "hi  ab ", "ab\u00e9z", "\U0001F642 hi", "<s>hi ab", "hi</s>ab"})
    EXPECT_EQ(t->decode(t->encode(s)), s) << s;
  // <0xC3><0xA9><0xC3> is one run of byte tokens, not valid UTF-8 as a whole: three U+FFFD (tokenizers' rule).
  EXPECT_EQ(t->decode({198, 172, 198}), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(t->decode({198, 172, 261, 198}), "\u00e9b\xEF\xBF\xBD");
}

TEST(TokenizerJsonPipeline, MetaspacePrependSchemes) {
  auto with = [](const char* scheme, bool split) {
    return sp_tokenizer([&](json& j) {
      j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", scheme}, {"split", split}};
      j["decoder"] = j["pre_tokenizer"];
    });
  };
  auto always = with("always", true), first = with("first", true), never = with("never", true),
       first_whole = with("first", false);
  EXPECT_EQ(always->encode("hi ab"), (Ids{265, 259, 266}));
  EXPECT_EQ(always->encode(" hi"), (Ids{265}));
  EXPECT_EQ(always->encode("<s>hi ab"), (Ids{1, 265, 259, 266}));  // always: after a special token too
  EXPECT_EQ(always->encode("hi</s>ab"), (Ids{265, 2, 259, 266}));
  EXPECT_EQ(first->encode("hi ab"), (Ids{265, 259, 266}));
  EXPECT_EQ(first->encode("<s>hi ab"), (Ids{1, 264, 259, 266}));  // first: only at the start of the input
  EXPECT_EQ(first->encode("hi</s>ab"), (Ids{265, 2, 266}));
  EXPECT_EQ(never->encode("hi ab"), (Ids{264, 259, 266}));
  EXPECT_EQ(never->encode(" hi"), (Ids{265}));
  EXPECT_EQ(first_whole->encode("hi  ab "), (Ids{265, 259, 259, 266, 259}));
  EXPECT_EQ(first_whole->encode("<s>hi ab"), (Ids{1, 264, 259, 266}));
  EXPECT_EQ(always->decode({1, 265, 259, 266}), "<s> hi ab");
  EXPECT_EQ(always->decode({265, 2, 259, 266}), "hi</s> ab");
  EXPECT_EQ(never->decode({264, 259, 266}), "hi ab");
  EXPECT_EQ(never->decode({265}), " hi");
}

TEST(TokenizerJsonPipeline, StreamingEqualsOneShotDecode) {
  // A decoder chain (not bytes per id): TextStream decodes windows of ids; the pieces must still add up.
  auto t = sp_tokenizer([](json& j) {
    j["normalizer"] = {{"type", "Sequence"},
                       {"normalizers", {{{"type", "Prepend"}, {"prepend", kMeta}}, replace("String", " ", kMeta)}}};
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {replace("String", kMeta, " "),
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  });
  // Characters made of byte tokens in a row: a context cut inside such a run must not turn the next one into
  // U+FFFD (ByteFallback replaces a whole invalid run).
  for (const std::string s : {"hi ab \U0001F642 hi", "ab\u00e9z hi  ab", "\u65e5\u672c hi",
                              "\u65e5\u672c\u8a9e\u3067\u3059 \U0001F642\U0001F9E0 hi"}) {
    for (const std::string p : {"hi", "hi \u65e5\u672c\u8a9e"}) {  // a prompt ending in byte tokens, too
      const auto prompt = t->encode(p);
      const auto ids = t->encode(s);
      const std::string want = t->decode(cat(prompt, ids)).substr(t->decode(prompt).size());
      for (size_t chunk : {1, 2, 5}) {
        TextStream ts(*t, prompt);
        std::vector<int32_t> so_far;
        std::string streamed;
        for (size_t i = 0; i < ids.size(); i += chunk) {
          so_far.insert(so_far.end(), ids.begin() + i, ids.begin() + std::min(ids.size(), i + chunk));
          streamed += ts.push(so_far);
        }
        streamed += ts.finish();
        EXPECT_EQ(streamed, want) << s << " chunk " << chunk << " prompt " << p;
      }
    }
  }
}
