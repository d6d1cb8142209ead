// Hugging Face tokenizer.json with a BPE model (byte-level as GPT-2/Llama-3/Qwen, or SentencePiece-style with
// byte_fallback as Llama-2/Mistral/Gemma), matching the `tokenizers` library's encode(text).ids (with
// add_special_tokens) and decode(ids, skip_special_tokens=False).
//
// Why by hand: Debian has no maintained C++ library for Hugging Face tokenizers (the reference implementation is
// Rust; the C++ ports are unpackaged single-author projects), so the BPE merge loop, the added-token matching and
// the JSON reading are written here, following tokenizers' source. The Unicode work is not: regexes (\p{L},
// \p{N}, lookahead, case-insensitive groups of the GPT-2/Llama-3/Qwen2 patterns) run on PCRE2 and normalization
// and character properties come from ICU.
//
// Pipeline (tokenizer/mod.rs encode_single_sequence): invalid UTF-8 in the input becomes U+FFFD (tokenizers only
// accepts valid strings; Python callers decode with errors="replace") -> added tokens that are not `normalized`
// are cut out of the raw text -> the rest is normalized -> `normalized` added tokens are cut out -> each
// remaining piece is pre-tokenized (Split / Digits / Metaspace / ByteLevel) -> BPE -> the post_processor's template
// (TemplateProcessing, Roberta/Bert) puts its special tokens around -> tokenizer_config.json's add_bos_token.
// Decoding maps ids to their token strings and runs the decoder chain (hf_pipeline.cpp).
#include "lookahead/tokenizer/tokenizer_json.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "bpe_model.h"
#include "hf_pipeline.h"
#include "lookahead/model/model_dir.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "lookahead/util/json_parse.h"
#include "text_unicode.h"

namespace la {
namespace {

using json = nlohmann::json;

struct AddedToken {
  std::string content;
  std::string pattern;  // what is matched: the content, normalized when `normalized`
  int32_t id = -1;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// Leftmost-longest matching of a set of added tokens (tokenizers uses an Aho-Corasick automaton; a handful to a
// few hundred tokens are checked by first byte here).
class AddedMatcher {
 public:
  void add(const AddedToken* t) {
    by_first_[static_cast<unsigned char>(t->pattern[0])].push_back(t);
    empty_ = false;
  }
  void finish() {  // longest first among tokens sharing a first byte
    for (auto& v : by_first_)
      std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->pattern.size() > b->pattern.size(); });
  }
  bool empty() const { return empty_; }
  // The leftmost match at or after `from`, longest first; nullptr if none.
  const AddedToken* find(std::string_view s, size_t from, size_t& at) const {
    for (size_t i = from; i < s.size(); ++i)
      for (const auto* t : by_first_[static_cast<unsigned char>(s[i])])
        if (s.compare(i, t->pattern.size(), t->pattern) == 0) {
          at = i;
          return t;
        }
    return nullptr;
  }

 private:
  std::array<std::vector<const AddedToken*>, 256> by_first_;
  bool empty_ = true;
};

struct Segment {
  std::string text;
  int32_t id;          // >= 0: an added token
  bool origin = false; // text: starts at offset 0 of the input
};

size_t char_start_before(std::string_view s, size_t i) {  // start of the character that ends at i
  do --i;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80);
  return i;
}

// Cuts the matches of `m` out of s (added_vocabulary.rs find_matches): single_word, lstrip and rstrip as there.
void split_added(const std::string& s, const AddedMatcher& m, std::vector<Segment>& out) {
  if (m.empty()) {
    out.push_back({s, -1, true});
    return;
  }
  size_t start_offset = 0, from = 0, at = 0;
  while (const AddedToken* t = m.find(s, from, at)) {
    size_t start = at, stop = at + t->pattern.size();
    from = stop;
    if (t->single_word) {
      size_t i = start ? char_start_before(s, start) : 0, j = stop;
      const bool space_before = start == 0 || !text::is_word_char(text::utf8_next(s, i));
      const bool space_after = stop == s.size() || !text::is_word_char(text::utf8_next(s, j));
      if (!space_before || !space_after) continue;
    }
    if (t->lstrip) {
      size_t ns = start;
      while (ns > 0) {
        size_t p = char_start_before(s, ns), q = p;
        if (!text::is_white_space(text::utf8_next(s, q))) break;
        ns = p;
      }
      start = std::max(ns, start_offset);
    }
    if (t->rstrip) {
      while (stop < s.size()) {
        size_t q = stop;
        if (!text::is_white_space(text::utf8_next(s, q))) break;
        stop = q;
      }
    }
    if (start_offset < start) out.push_back({s.substr(start_offset, start - start_offset), -1, start_offset == 0});
    out.push_back({std::string(), t->id});
    start_offset = std::max(start_offset, stop);
  }
  if (start_offset < s.size()) out.push_back({s.substr(start_offset), -1, start_offset == 0});
}

bool get_flag(const json& j, const char* key, bool dflt, const std::string& origin) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  LA_CHECK(j[key].is_boolean(), origin, ": \"", key, "\" must be true or false");
  return j[key].get<bool>();
}

int32_t get_id(const json& v, const std::string& origin, const std::string& what) {
  LA_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (int64_t(1) << 31), origin, ": ",
           what, " must be a token id (a non-negative integer)");
  return static_cast<int32_t>(v.get<int64_t>());
}

class HfBpeTokenizer : public Tokenizer {
 public:
  HfBpeTokenizer(const HfBpeTokenizer&) = delete;  // the matchers point into added_
  HfBpeTokenizer(const json& j, const std::string& origin, const HfTokenizerConfig& cfg)
      : norm_(at(j, "normalizer"), origin),
        pre_(at(j, "pre_tokenizer"), origin),
        decoder_(at(j, "decoder"), origin),
        model_(make_model(j, origin)) {
    read_added(at(j, "added_tokens"), origin);
    read_post_processor(at(j, "post_processor"), origin);
    apply_bos(cfg, origin);
    build_pieces(origin);
  }

  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids = prefix_;
    std::vector<Segment> raw, normed;
    std::vector<std::string> pieces;
    split_added(text::utf8_repair(text), raw_tokens_, raw);
    for (const auto& seg : raw) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
        continue;
      }
      normed.clear();
      bool keeps_start = true;
      split_added(norm_.empty() ? seg.text : norm_.apply(seg.text, &keeps_start), normalized_tokens_, normed);
      for (const auto& n : normed) {
        if (n.id >= 0) {
          ids.push_back(n.id);
          continue;
        }
        pieces.clear();
        // At offset 0 of the input (Metaspace "first"): the first piece of the first segment, if the normalizer
        // kept the segment's first character (tokenizers tracks this through its offsets).
        pre_.run(n.text, pieces, seg.origin && n.origin && keeps_start);
        for (const auto& p : pieces) model_.tokenize(p, ids);
      }
    }
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    if (bytes_per_id()) {
      std::string bytes;
      for (auto id : ids) append_bytes(id, bytes);
      return text::utf8_repair(bytes);
    }
    std::vector<std::string> toks;  // ids without a token are skipped, as tokenizers does
    toks.reserve(ids.size());
    for (auto id : ids)
      if (id >= 0 && static_cast<size_t>(id) < tokens_.size() && has_token_[id]) toks.push_back(tokens_[id]);
    return decoder_.decode(std::move(toks));
  }
  // A ByteLevel decoder alone concatenates per-token bytes; other chains (Metaspace and Strip look at the first
  // token, ByteFallback at runs of byte tokens) decode a window of ids (TextStream).
  bool bytes_per_id() const override { return decoder_.byte_level_only(); }
  void append_bytes(int32_t id, std::string& out) const override {
    if (id >= 0 && static_cast<size_t>(id) < pieces_.size()) out += pieces_[id];
  }
  int vocab_size() const override { return static_cast<int>(tokens_.size()); }
  std::string kind() const override {
    return pre_.byte_level() ? "tokenizer.json (byte-level BPE)" : "tokenizer.json (BPE)";
  }

 private:
  static const json& at(const json& j, const char* key) {
    static const json null_value;
    return j.contains(key) ? j[key] : null_value;
  }

  static BpeModel make_model(const json& j, const std::string& origin) {
    LA_CHECK(j.contains("model") && j["model"].is_object(), origin, ": no \"model\" object");
    const json& m = j["model"];
    std::string type = m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>()
                       : m.contains("merges")                      ? "BPE"
                                                                   : "(none)";
    LA_CHECK(type == "BPE", origin, ": unsupported tokenizer model type '", type, "' (only BPE is supported)");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      LA_CHECK(!m.contains(k) || m[k].is_null() || (m[k].is_string() && m[k].get<std::string>().empty()), origin,
               ": BPE with \"", k, "\" (a WordPiece-style BPE) is not supported");
    if (m.contains("dropout") && !m["dropout"].is_null())
      LA_CHECK(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0, origin,
               ": BPE dropout makes encoding random; it is not supported");
    LA_CHECK(m.contains("vocab") && m["vocab"].is_object(), origin, ": BPE model has no \"vocab\" object");
    LA_CHECK(m.contains("merges") && m["merges"].is_array(), origin, ": BPE model has no \"merges\" array");
    Vocab vocab;
    vocab.reserve(m["vocab"].size());
    for (const auto& [tok, id] : m["vocab"].items()) vocab[tok] = get_id(id, origin, "vocab entry '" + tok + "'");
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(m["merges"].size());
    for (const auto& x : m["merges"]) {
      const size_t n = merges.size();
      if (x.is_string()) {
        const std::string s = x.get<std::string>();
        if (s.rfind("#version", 0) == 0) continue;
        const size_t sp = s.find(' ');
        LA_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, origin, ": merge ", n, " ('",
                 s, "') is not two tokens separated by one space");
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        LA_CHECK(x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_string(), origin, ": merge ", n,
                 " is neither \"a b\" nor [\"a\", \"b\"]");
        merges.emplace_back(x[0].get<std::string>(), x[1].get<std::string>());
      }
    }
    BpeModel::Options o;
    o.ignore_merges = get_flag(m, "ignore_merges", false, origin);
    o.byte_fallback = get_flag(m, "byte_fallback", false, origin);
    o.fuse_unk = get_flag(m, "fuse_unk", false, origin);
    if (m.contains("unk_token") && !m["unk_token"].is_null()) {
      LA_CHECK(m["unk_token"].is_string(), origin, ": \"unk_token\" must be a string");
      o.unk_token = m["unk_token"].get<std::string>();
    }
    return BpeModel(std::move(vocab), merges, o, origin);
  }

  int32_t token_to_id(const std::string& s) const {  // added tokens first, then the model (AddedVocabulary)
    if (auto it = added_ids_.find(s); it != added_ids_.end()) return it->second;
    return model_.id_of(s);
  }

  void read_added(const json& a, const std::string& origin) {
    if (a.is_null()) return;
    LA_CHECK(a.is_array(), origin, ": \"added_tokens\" must be an array");
    // Ids as tokenizers assigns them (AddedVocabulary::add_tokens): the vocabulary's id when the content is in it,
    // else the next free id; the file's "id" only produces a warning there when it differs.
    int64_t next_id = static_cast<int64_t>(model_.vocab().size());
    std::unordered_map<int32_t, size_t> slot;  // id -> index in added_
    for (const auto& x : a) {
      LA_CHECK(x.is_object() && x.contains("content") && x["content"].is_string(), origin,
               ": every added token needs a string \"content\"");
      AddedToken t;
      t.content = x["content"].get<std::string>();
      if (t.content.empty()) continue;
      t.special = get_flag(x, "special", false, origin);
      t.single_word = get_flag(x, "single_word", false, origin);
      t.lstrip = get_flag(x, "lstrip", false, origin);
      t.rstrip = get_flag(x, "rstrip", false, origin);
      t.normalized = get_flag(x, "normalized", !t.special, origin);
      if (x.contains("id")) get_id(x["id"], origin, "added token '" + t.content + "' id");
      int32_t id = token_to_id(t.content);
      if (id < 0) {
        LA_CHECK(next_id < (int64_t(1) << 31), origin, ": too many added tokens");
        id = static_cast<int32_t>(next_id++);
      }
      t.id = id;
      added_ids_[t.content] = id;
      // One token per id, the last one read wins (added_tokens_map_r).
      if (auto it = slot.find(id); it != slot.end()) added_[it->second] = std::move(t);
      else slot[id] = added_.size(), added_.push_back(std::move(t));
    }
    for (auto& t : added_) {
      t.pattern = t.normalized && !norm_.empty() ? norm_.apply(t.content) : t.content;
      if (t.pattern.empty()) continue;
      (t.normalized ? normalized_tokens_ : raw_tokens_).add(&t);
    }
    raw_tokens_.finish();
    normalized_tokens_.finish();
  }

  // The ids a template puts before and after the text; processors of a Sequence wrap one another.
  void read_post_processor(const json& p, const std::string& origin, int depth = 0) {
    if (p.is_null()) return;
    LA_CHECK(depth < hf::kMaxNesting, origin, ": post-processors nested more than ", hf::kMaxNesting, " deep");
    LA_CHECK(p.is_object() && p.contains("type") && p["type"].is_string(), origin,
             ": post_processor must be an object with a string \"type\"");
    const std::string t = p["type"];
    if (t == "ByteLevel") return;  // offsets only
    if (t == "Sequence") {
      LA_CHECK(p.contains("processors") && p["processors"].is_array(), origin,
               ": Sequence post_processor needs a \"processors\" array");
      for (const auto& x : p["processors"]) read_post_processor(x, origin, depth + 1);
      return;
    }
    std::vector<int32_t> pre, post;
    if (t == "RobertaProcessing" || t == "BertProcessing") {
      for (const char* k : {"cls", "sep"})
        LA_CHECK(p.contains(k) && p[k].is_array() && p[k].size() == 2, origin, ": ", t, " needs \"", k,
                 "\": [token, id]");
      pre.push_back(get_id(p["cls"][1], origin, "cls id"));
      post.push_back(get_id(p["sep"][1], origin, "sep id"));
    } else if (t == "TemplateProcessing") {
      LA_CHECK(p.contains("single") && p["single"].is_array(), origin, ": TemplateProcessing needs a \"single\" array");
      const json* specials = p.contains("special_tokens") && p["special_tokens"].is_object() ? &p["special_tokens"]
                                                                                             : nullptr;
      bool seen_a = false;
      for (const auto& piece : p["single"]) {
        LA_CHECK(piece.is_object() && piece.size() == 1, origin, ": bad TemplateProcessing piece ", piece.dump());
        if (piece.contains("Sequence")) {
          const auto& s = piece["Sequence"];
          LA_CHECK(s.is_object() && s.contains("id") && s["id"] == "A" && !seen_a, origin,
                   ": the single TemplateProcessing template must hold sequence A once");
          seen_a = true;
          continue;
        }
        LA_CHECK(piece.contains("SpecialToken") && piece["SpecialToken"].is_object() &&
                     piece["SpecialToken"].contains("id") && piece["SpecialToken"]["id"].is_string(),
                 origin, ": bad TemplateProcessing piece ", piece.dump());
        const std::string name = piece["SpecialToken"]["id"];
        LA_CHECK(specials && specials->contains(name) && (*specials)[name].is_object() &&
                     (*specials)[name].contains("ids") && (*specials)[name]["ids"].is_array(),
                 origin, ": TemplateProcessing uses special token '", name, "' without its ids");
        for (const auto& id : (*specials)[name]["ids"]) (seen_a ? post : pre).push_back(get_id(id, origin, name));
      }
      LA_CHECK(seen_a, origin, ": the single TemplateProcessing template has no sequence A");
    } else {
      fail(origin, ": unsupported post_processor '", t, "'");
    }
    prefix_.insert(prefix_.begin(), pre.begin(), pre.end());
    suffix_.insert(suffix_.end(), post.begin(), post.end());
  }

  void apply_bos(const HfTokenizerConfig& cfg, const std::string& origin) {
    if (cfg.add_bos < 0) return;
    int32_t bos = cfg.model_bos_id;
    if (!cfg.bos_token.empty()) {
      bos = token_to_id(cfg.bos_token);
      LA_CHECK(bos >= 0, origin, ": bos_token '", cfg.bos_token, "' is not a token");
    }
    const bool has = !prefix_.empty() && prefix_[0] == bos;
    if (cfg.add_bos == 1 && !has) {
      LA_CHECK(bos >= 0, origin, ": add_bos_token is true but no BOS token is known");
      prefix_.insert(prefix_.begin(), bos);
    } else if (cfg.add_bos == 0 && has) {
      prefix_.erase(prefix_.begin());
    }
  }

  // The token string of every id (the vocabulary's, an added token's content) for the decoder; with a ByteLevel
  // decoder alone also its bytes (decoders/byte_level.rs): a token whose characters are all in the byte table
  // gives those bytes, any other token (an added token with a space, say) its own UTF-8.
  void build_pieces(const std::string& origin) {
    int64_t max_id = -1;
    size_t count = model_.vocab().size() + added_.size();
    for (const auto& [tok, id] : model_.vocab()) max_id = std::max<int64_t>(max_id, id);
    for (const auto& t : added_) max_id = std::max<int64_t>(max_id, t.id);
    for (int32_t id : prefix_) max_id = std::max<int64_t>(max_id, id);
    for (int32_t id : suffix_) max_id = std::max<int64_t>(max_id, id);
    LA_CHECK(max_id < static_cast<int64_t>(2 * count + 1024), origin, ": token id ", max_id, " is far beyond the ",
             count, " tokens of the vocabulary");
    tokens_.assign(static_cast<size_t>(max_id + 1), std::string());
    has_token_.assign(tokens_.size(), 0);
    for (const auto& [tok, id] : model_.vocab()) tokens_[id] = tok, has_token_[id] = 1;
    for (const auto& t : added_) tokens_[t.id] = t.content, has_token_[t.id] = 1;
    if (decoder_.byte_level_only()) {
      pieces_.resize(tokens_.size());
      for (size_t id = 0; id < tokens_.size(); ++id)
        if (has_token_[id]) pieces_[id] = hf::byte_level_bytes(tokens_[id]);
    }
  }

  hf::NormalizerChain norm_;
  hf::PreTokenizerChain pre_;
  hf::DecoderChain decoder_;
  BpeModel model_;
  std::vector<AddedToken> added_;
  Vocab added_ids_;  // content -> id
  AddedMatcher raw_tokens_, normalized_tokens_;
  std::vector<int32_t> prefix_, suffix_;
  std::vector<std::string> tokens_;  // token string by id
  std::vector<char> has_token_;      // whether an id has a token (tokenizers skips the others when decoding)
  std::vector<std::string> pieces_;  // ByteLevel decoder alone: decoded bytes by id
};

}  // namespace

std::unique_ptr<Tokenizer> parse_tokenizer_json(const std::string& json_text, const std::string& origin,
                                                const HfTokenizerConfig& config) {
  // depth-limited: the pipeline readers recurse into "Sequence"s (tests/fuzz)
  const json j = parse_json_checked(json_text, origin);
  LA_CHECK(j.is_object(), origin, ": not a JSON object");
  try {
    return std::make_unique<HfBpeTokenizer>(j, origin, config);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // a JSON value of an unexpected type that a check above missed
    fail(origin, ": unexpected content (", e.what(), ")");
  }
}

std::unique_ptr<Tokenizer> load_tokenizer_json(const ModelDir& d, int model_bos_id) {
  const std::string path = d.file("tokenizer.json");
  LA_CHECK(file_exists(path), "model directory '", d.path(), "' has no tokenizer.model or tokenizer.json");
  HfTokenizerConfig cfg;
  cfg.model_bos_id = model_bos_id;
  if (const json* tc = d.tokenizer_config()) {
    const json& c = *tc;
    if (c.contains("add_bos_token") && c["add_bos_token"].is_boolean()) cfg.add_bos = c["add_bos_token"] ? 1 : 0;
    if (c.contains("bos_token")) {
      const json& b = c["bos_token"];
      if (b.is_string()) cfg.bos_token = b.get<std::string>();
      else if (b.is_object() && b.contains("content") && b["content"].is_string()) cfg.bos_token = b["content"];
    }
  }
  return parse_tokenizer_json(read_file(path), path, cfg);
}

}  // namespace la
