// GGUF-embedded tokenizers (include/lookahead/tokenizer/gguf_tokenizer.h).
//
// "llama": the pieces, scores and token types become a sentencepiece ModelProto, serialised here by hand (protobuf
// wire format: Debian's libsentencepiece-dev ships no .pb.h) and loaded by Debian's sentencepiece, so encoding is
// sentencepiece's own: a BPE model over the scores (what llama.cpp's SPM tokenizer does too: the GGUF does not
// record the model type), byte fallback when the vocabulary has byte tokens, no normalization rule (llama.cpp
// applies none), a dummy prefix as tokenizer.ggml.add_space_prefix says. Control and user-defined tokens written
// in the text (<start_of_turn>, <|im_start|>, Gemma's runs of spaces) are matched as tokens before sentencepiece
// sees the rest, as Hugging Face's tokenizers and llama.cpp (parse_special) do.
//
// "gpt2": the vocabulary, the merges and the pre-tokenizer that tokenizer.ggml.pre names (llama.cpp's names: the
// GPT-2 default, mpt, llama-bpe, qwen2, qwen35, smollm/starcoder/refact, command-r, deepseek-llm, deepseek-coder,
// falcon) become a Hugging Face tokenizer.json, parsed by the tokenizer.json reader (src/tokenizer/tokenizer_json.cpp);
// control tokens are its special added tokens. Any other name is refused. "gemma4" (Gemma 4: SentencePiece-style
// BPE with merges and byte fallback) becomes a tokenizer.json too (bpe_tokenizer). tests/core/test_tokenizer_vocab.cpp checks
// each against Hugging Face's ids on llama.cpp's vocabulary files.
#include "lookahead/tokenizer/gguf_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>
#include <unordered_map>

#include "lookahead/model/gguf.h"
#include "lookahead/tokenizer/tokenizer_json.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// --- protobuf wire format (just what a ModelProto needs) ---
void varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
}
void tag(std::string& s, int field, int wire) { varint(s, (uint64_t(field) << 3) | uint64_t(wire)); }
void field_varint(std::string& s, int field, uint64_t v) { tag(s, field, 0), varint(s, v); }
void field_bytes(std::string& s, int field, const std::string& b) { tag(s, field, 2), varint(s, b.size()), s += b; }
void field_float(std::string& s, int field, float f) {
  tag(s, field, 5);
  char b[4];
  std::memcpy(b, &f, 4);
  s.append(b, 4);
}

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<double> scores;  // empty: none
  std::vector<int64_t> types;  // empty: all normal
  int type(size_t i) const { return types.empty() ? kNormal : static_cast<int>(types[i]); }
};

Vocabulary read_vocab(const GgufFile& f) {
  const std::string& o = f.origin();
  Vocabulary v;
  const GgufValue* t = f.find("tokenizer.ggml.tokens");
  LA_CHECK(t, "GGUF '", o, "': no tokenizer (metadata 'tokenizer.ggml.tokens' is missing); give --tokenizer DIR");
  LA_CHECK(t->kind == GgufKind::ARRAY && t->elem == GgufKind::STRING && !t->strs.empty(), "GGUF '", o,
           "': metadata 'tokenizer.ggml.tokens' must be a non-empty array of strings");
  LA_CHECK(t->strs.size() < (size_t(1) << 24), "GGUF '", o, "': 'tokenizer.ggml.tokens' has too many tokens (",
           t->strs.size(), ")");
  v.tokens = t->strs;
  if (const GgufValue* s = f.find("tokenizer.ggml.scores")) {
    LA_CHECK(s->kind == GgufKind::ARRAY && (s->elem == GgufKind::F32 || s->elem == GgufKind::F64) &&
                 s->floats.size() == v.tokens.size(),
             "GGUF '", o, "': metadata 'tokenizer.ggml.scores' must be an array of ", v.tokens.size(), " floats");
    v.scores = s->floats;
  }
  if (const GgufValue* ty = f.find("tokenizer.ggml.token_type")) {
    LA_CHECK(ty->kind == GgufKind::ARRAY && ty->items.empty() && ty->strs.empty() && ty->floats.empty() &&
                 ty->ints.size() == v.tokens.size(),
             "GGUF '", o, "': metadata 'tokenizer.ggml.token_type' must be an array of ", v.tokens.size(), " integers");
    v.types = ty->ints;
    for (size_t i = 0; i < v.types.size(); ++i)
      LA_CHECK(v.types[i] >= 1 && v.types[i] <= 6, "GGUF '", o, "': token ", i, " has type ", v.types[i],
               " (token types are 1-6)");
  }
  return v;
}

// Control tokens cut out of the text, leftmost and longest first.
class SpecialSplitter {
 public:
  void add(const std::string& s, int32_t id) {
    if (s.empty()) return;
    ids_.emplace(s, id);
    auto& L = lengths_[static_cast<unsigned char>(s[0])];
    if (std::find(L.begin(), L.end(), s.size()) == L.end()) {
      L.push_back(s.size());
      std::sort(L.rbegin(), L.rend());
    }
  }
  // Calls text(piece) for plain runs and special(id) for tokens, in order.
  template <class T, class S>
  void split(const std::string& s, T&& text, S&& special) const {
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      for (size_t len : lengths_[static_cast<unsigned char>(s[i])]) {
        if (len > s.size() - i) continue;
        auto it = ids_.find(s.substr(i, len));
        if (it == ids_.end()) continue;
        if (i > start) text(s.substr(start, i - start));
        special(it->second);
        start = i + len;
        i = start - 1;
        break;
      }
    }
    if (start < s.size()) text(s.substr(start));
  }

 private:
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<size_t> lengths_[256];
};

class GgufSpTokenizer : public Tokenizer {
 public:
  GgufSpTokenizer(const GgufFile& f, const Vocabulary& v, int bos_id) : n_(static_cast<int>(v.tokens.size())) {
    const std::string& o = f.origin();
    const int64_t unk = f.get_int("tokenizer.ggml.unknown_token_id", -1);
    bool have_unk = false, bytes = false;
    std::string proto;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      int type = v.type(i);
      if (int64_t(i) == unk) type = kUnknown;
      if (type == kUnknown) {
        if (have_unk) type = kControl;  // sentencepiece allows one unknown piece
        have_unk = true;
      }
      bytes = bytes || type == kByte;
      std::string piece;
      field_bytes(piece, 1, v.tokens[i]);
      field_float(piece, 2, v.scores.empty() ? 0.f : static_cast<float>(v.scores[i]));
      field_varint(piece, 3, static_cast<uint64_t>(type));
      field_bytes(proto, 1, piece);
      // Control and user-defined tokens are matched in the raw text (Gemma's user-defined "  " runs of spaces
      // too, before spaces become "▁"), as Hugging Face's added tokens and llama.cpp's special-token partition.
      if (type == kControl || type == kUserDefined) specials_.add(v.tokens[i], static_cast<int32_t>(i));
    }
    LA_CHECK(have_unk, "GGUF '", o, "': the llama (SentencePiece) vocabulary has no unknown token (token type 2 or "
             "tokenizer.ggml.unknown_token_id)");
    std::string trainer;
    field_varint(trainer, 3, 2);  // model_type BPE
    if (bytes) field_varint(trainer, 35, 1);  // byte_fallback
    // Pieces made of whitespace only ("▁▁", Gemma's runs of spaces) are ordinary pieces, as in llama.cpp's SPM
    // tokenizer (sentencepiece's default would keep them out of encoding).
    field_varint(trainer, 26, 1);  // allow_whitespace_only_pieces
    field_bytes(proto, 2, trainer);
    std::string norm;
    field_bytes(norm, 1, "identity");
    field_varint(norm, 3, f.get_bool("tokenizer.ggml.add_space_prefix", true) ? 1 : 0);
    field_varint(norm, 4, f.get_bool("tokenizer.ggml.remove_extra_whitespaces", false) ? 1 : 0);
    field_varint(norm, 5, 1);  // escape_whitespaces
    field_bytes(proto, 3, norm);
    const auto st = sp_.LoadFromSerializedProto(proto);
    LA_CHECK(st.ok(), "GGUF '", o, "': its llama (SentencePiece) vocabulary does not load: ", st.ToString());
    bos_ = bos_id >= 0 ? bos_id : static_cast<int>(f.get_int("tokenizer.ggml.bos_token_id", 1));
    add_bos_ = f.get_bool("tokenizer.ggml.add_bos_token", true);
    LA_CHECK(!add_bos_ || (bos_ >= 0 && bos_ < n_), "GGUF '", o, "': bos token id ", bos_, " is outside the ", n_,
             " tokens");
  }

  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> out;
    if (add_bos_) out.push_back(bos_);
    std::vector<int> ids;
    specials_.split(
        text,
        [&](const std::string& piece) {
          ids.clear();
          const auto st = sp_.Encode(piece, &ids);
          LA_CHECK(st.ok(), "tokenizer: cannot encode text: ", st.ToString());
          out.insert(out.end(), ids.begin(), ids.end());
        },
        [&](int32_t id) { out.push_back(id); });
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::vector<int> v;
    for (auto i : ids)
      if (i >= 0 && i < n_ && !sp_.IsControl(i)) v.push_back(i);
    std::string s;
    sp_.Decode(v, &s).IgnoreError();
    return s;
  }
  int vocab_size() const override { return n_; }
  std::string kind() const override { return "GGUF llama (sentencepiece)"; }

 private:
  sentencepiece::SentencePieceProcessor sp_;
  SpecialSplitter specials_;
  int n_;
  int bos_ = 1;
  bool add_bos_ = true;
};

using json = nlohmann::json;

// The pre-tokenizer of a tokenizer.json for llama.cpp's tokenizer.ggml.pre names (llama-vocab.cpp lists the regexes
// each name stands for; these are the Hugging Face files those models ship).
// nfc: the tokenizer.json normalizes to NFC first (GPT-NeoX's, which MPT uses, and Command-R's).
json pre_tokenizer_for(const std::string& pre, bool& ignore_merges, bool& nfc, const std::string& origin) {
  const char* llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const char* qwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  // Qwen3.5: letters and combining marks together (\p{M}), so a base letter keeps its accents in one piece.
  const char* qwen35 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  // GPT-2's pattern, for the sequences that name it as one Split among others (falcon).
  const char* gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
  // DeepSeek's Splits (its LLM and Coder tokenizer.json files): letter runs of the listed scripts, ASCII and
  // full-width punctuation runs, CJK/Hangul runs and digit runs each isolated, with an optional leading space.
  // (code points written as \x{...}: several of the file's characters are not in NFC, and an editor that normalizes
  // would turn a range such as U+1F5F-U+1F7D into an invalid one).
  const char* ds_cjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
  const char* ds_punct = R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
  const char* ds_letters =
      R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
      R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C})"
      R"(\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5})"
      R"(\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B})"
      R"(\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45})"
      R"(\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4})"
      R"(\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB})"
      R"(\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115})"
      R"(\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139})"
      R"(\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
      R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
      R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
      R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB})"
      R"(\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
  auto byte_level = [](bool regex) {
    return json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", regex}};
  };
  auto split = [&](const char* re) {
    return json{{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"}, {"invert", false}};
  };
  ignore_merges = false;
  nfc = pre == "mpt" || pre == "command-r";
  if (pre.empty() || pre == "default" || pre == "gpt2" || pre == "gpt-2" || pre == "mpt") return byte_level(true);
  if (pre == "llama-bpe" || pre == "llama3" || pre == "smaug-bpe") {
    ignore_merges = true;
    return json{{"type", "Sequence"}, {"pretokenizers", {split(llama3), byte_level(false)}}};
  }
  if (pre == "qwen2" || pre == "deepseek-r1-qwen")
    return json{{"type", "Sequence"}, {"pretokenizers", {split(qwen2), byte_level(false)}}};
  if (pre == "qwen35") return json{{"type", "Sequence"}, {"pretokenizers", {split(qwen35), byte_level(false)}}};
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r")
    return json{{"type", "Sequence"},
                {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)}}};
  if (pre == "deepseek-llm")
    return json{{"type", "Sequence"},
                {"pretokenizers", {split(R"([\r\n])"), split(ds_letters), split(ds_punct),
                                   split(R"(\s+$)"), split(ds_cjk), split(R"(\p{N}+)"), byte_level(false)}}};
  if (pre == "deepseek-coder")
    return json{{"type", "Sequence"},
                {"pretokenizers", {split(R"([\r\n])"), split(R"(\s?\p{L}+)"), split(R"(\s?\p{P}+)"), split(ds_cjk),
                                   split(R"(\p{N})"), byte_level(false)}}};
  if (pre == "falcon")  // HF's Punctuation pre-tokenizer is the first Split (ASCII punctuation and \p{P})
    return json{{"type", "Sequence"},
                {"pretokenizers", {split(R"([\p{P}\$\+<=>\^~\|`]+)"), split(gpt2), split("[0-9][0-9][0-9]"),
                                   byte_level(false)}}};
  fail("GGUF '", origin, "': unsupported pre-tokenizer '", pre, "' in 'tokenizer.ggml.pre' (supported: default/gpt2, "
       "mpt, llama-bpe, qwen2, qwen35, smollm, starcoder, refact, command-r, deepseek-llm, deepseek-coder, falcon); "
       "give --tokenizer DIR with the model's tokenizer.json");
}

// "gpt2" (byte-level BPE) and "gemma4" (SentencePiece-style BPE: spaces as U+2581, merges over raw UTF-8, <0xXX>
// byte fallback, only newline runs split apart, as llama.cpp's gemma4 pre-tokenizer) as a tokenizer.json.
std::unique_ptr<Tokenizer> bpe_tokenizer(const GgufFile& f, const Vocabulary& v, int bos_id, bool gemma4) {
  const std::string& o = f.origin();
  const GgufValue* m = f.find("tokenizer.ggml.merges");
  LA_CHECK(m && m->kind == GgufKind::ARRAY && m->elem == GgufKind::STRING, "GGUF '", o, "': a ",
           gemma4 ? "gemma4" : "gpt2 (byte-level BPE)",
           " tokenizer needs 'tokenizer.ggml.merges', an array of strings");
  bool ignore_merges = false, nfc = false;
  json j;
  if (gemma4) {
    const json split = {{"type", "Split"}, {"pattern", {{"Regex", "[^\n]+|\n+"}}}, {"behavior", "Isolated"},
                        {"invert", false}};
    j["pre_tokenizer"] = split;
  } else {
    j["pre_tokenizer"] = pre_tokenizer_for(f.get_string("tokenizer.ggml.pre", "default"), ignore_merges, nfc, o);
  }
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    vocab[v.tokens[i]] = i;
    const int t = v.type(i);
    if (t == kControl || t == kUserDefined)
      added.push_back({{"id", i}, {"content", v.tokens[i]}, {"special", t == kControl}, {"normalized", false},
                       {"lstrip", false}, {"rstrip", false}, {"single_word", false}});
  }
  j["model"] = {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", m->strs}, {"ignore_merges", ignore_merges},
                {"byte_fallback", gemma4}};
  if (gemma4) {
    j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  } else {
    j["normalizer"] = nfc ? json{{"type", "NFC"}} : json(nullptr);
    j["decoder"] = {{"type", "ByteLevel"}};
  }
  j["added_tokens"] = std::move(added);
  j["post_processor"] = nullptr;
  HfTokenizerConfig cfg;
  cfg.model_bos_id = bos_id >= 0 ? bos_id : static_cast<int>(f.get_int("tokenizer.ggml.bos_token_id", -1));
  if (f.has("tokenizer.ggml.add_bos_token")) cfg.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", false) ? 1 : 0;
  return parse_tokenizer_json(j.dump(-1, ' ', false, json::error_handler_t::replace),
                              o + " (tokenizer.ggml.*)", cfg);
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& f, int bos_id) {
  const std::string model = f.get_string("tokenizer.ggml.model");
  LA_CHECK(!model.empty(), "GGUF '", f.origin(), "': no tokenizer (metadata 'tokenizer.ggml.model' is missing); "
           "give --tokenizer DIR");
  const Vocabulary v = read_vocab(f);
  if (model == "llama") return std::make_unique<GgufSpTokenizer>(f, v, bos_id);
  if (model == "gpt2") return bpe_tokenizer(f, v, bos_id, false);
  if (model == "gemma4") return bpe_tokenizer(f, v, bos_id, true);
  fail("GGUF '", f.origin(), "': unsupported tokenizer model '", model, "' in 'tokenizer.ggml.model' (supported: "
       "llama, gpt2, gemma4)");
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path, int bos_id) {
  return load_gguf_tokenizer(GgufFile::open(path), bos_id);
}

}  // namespace la
