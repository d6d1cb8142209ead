// Normalizers, pre-tokenizers and decoders of tokenizer.json, following Hugging Face tokenizers (normalizers/*.rs,
// pre_tokenizers/*.rs, decoders/*.rs, tokenizer/normalizer.rs `split`, tokenizer/pattern.rs): a normalizer rewrites
// the whole text; a pre-tokenizer stage splits every current piece again, and pieces that come out empty are
// dropped; a decoder stage maps the list of token strings to a new list, joined at the end.
#include "hf_pipeline.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "lookahead/util/error.h"

namespace la::hf {
namespace {

using json = nlohmann::json;

// The GPT-2 pattern that ByteLevel(use_regex=true) splits with.
const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string type_of(const json& j, const std::string& origin, const char* what) {
  LA_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(), origin, ": ", what,
           " must be an object with a string \"type\"");
  return j["type"].get<std::string>();
}

bool flag(const json& j, const char* key, bool dflt, const std::string& origin) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  LA_CHECK(j[key].is_boolean(), origin, ": \"", key, "\" must be true or false");
  return j[key].get<bool>();
}

SplitBehavior behavior_of(const json& j, const std::string& origin) {
  LA_CHECK(j.contains("behavior") && j["behavior"].is_string(), origin, ": Split pre-tokenizer needs a \"behavior\"");
  const std::string b = j["behavior"];
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  fail(origin, ": unsupported Split behavior '", b, "'");
}

// A {"String": literal} or {"Regex": pattern} value (Split, Replace).
std::shared_ptr<text::Regex> pattern_of(const json& j, const std::string& origin, const std::string& what) {
  LA_CHECK(j.contains("pattern") && j["pattern"].is_object() && j["pattern"].size() == 1, origin, ": ", what,
           " needs a \"pattern\" {\"String\": ...} or {\"Regex\": ...}");
  const auto& p = j["pattern"];
  const bool is_regex = p.contains("Regex");
  LA_CHECK(is_regex || p.contains("String"), origin, ": ", what, " pattern must be {\"String\": ...} or {\"Regex\": ...}");
  const auto& v = is_regex ? p["Regex"] : p["String"];
  LA_CHECK(v.is_string(), origin, ": ", what, " pattern must be a string");
  const std::string pat = v.get<std::string>();
  return std::make_shared<text::Regex>(is_regex ? pat : text::Regex::quote(pat), origin + ": " + what);
}

std::string string_field(const json& j, const char* key, const std::string& dflt, const std::string& origin,
                         const std::string& what) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  LA_CHECK(j[key].is_string(), origin, ": ", what, " \"", key, "\" must be a string");
  return j[key].get<std::string>();
}

// A one-character string field (Metaspace's replacement, Strip's content).
std::string char_field(const json& j, const char* key, const std::string& dflt, const std::string& origin,
                       const std::string& what) {
  const std::string c = string_field(j, key, dflt, origin, what);
  size_t i = 0;
  LA_CHECK(!c.empty() && text::utf8_valid(c) && (text::utf8_next(c, i), i == c.size()), origin, ": ", what, " \"",
           key, "\" must be one character");
  return c;
}

size_t count_field(const json& j, const char* key, const std::string& origin, const std::string& what) {
  if (!j.contains(key) || j[key].is_null()) return 0;
  const json& v = j[key];
  const bool ok = v.is_number_unsigned() ? v.get<uint64_t>() < (uint64_t(1) << 31)
                                         : v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (int64_t(1) << 31);
  LA_CHECK(ok, origin, ": ", what, " \"", key, "\" must be a non-negative integer");
  return static_cast<size_t>(v.get<int64_t>());
}

PrependScheme prepend_scheme_of(const json& j, const std::string& origin) {
  if (!j.contains("prepend_scheme") || j["prepend_scheme"].is_null())  // files before tokenizers 0.19
    return flag(j, "add_prefix_space", true, origin) ? PrependScheme::Always : PrependScheme::Never;
  LA_CHECK(j["prepend_scheme"].is_string(), origin, ": Metaspace \"prepend_scheme\" must be a string");
  const std::string s = j["prepend_scheme"];
  if (s == "always") return PrependScheme::Always;
  if (s == "first") return PrependScheme::First;
  if (s == "never") return PrependScheme::Never;
  fail(origin, ": unsupported Metaspace prepend_scheme '", s, "' (expected always, first or never)");
}

// Replaces every match of `re` in s by `content`; `at_start` is set when a match at offset 0 removed the first
// character without putting anything in its place.
std::string replace_all(const text::Regex& re, const std::string& s, const std::string& content, bool* lost_start) {
  std::vector<std::pair<size_t, size_t>> m;
  re.find_all(s, m);
  if (m.empty()) return s;
  std::string out;
  size_t prev = 0;
  for (auto [a, b] : m) {
    if (a == 0 && b > 0 && content.empty() && lost_start) *lost_start = true;
    out.append(s, prev, a - prev);
    out += content;
    prev = b;
  }
  out.append(s, prev, std::string::npos);
  return out;
}

struct Tables {
  std::array<std::string, 256> to_char;
  std::array<int, 512> to_byte;
  Tables() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? char32_t(b) : char32_t(256 + n++);
      text::utf8_append(to_char[b], c);
      to_byte[c] = b;
    }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_char(unsigned char b) { return tables().to_char[b]; }
int char_byte(char32_t c) { return c < 512 ? tables().to_byte[c] : -1; }

// ---------------------------------------------------------------------------------------------------------------
struct NormalizerChain::Step {
  enum Kind { Form, Replace, Prepend, Strip, Lowercase } kind;
  std::shared_ptr<const text::Normalizer> form;  // Form
  std::shared_ptr<text::Regex> pattern;          // Replace
  std::string content;                           // Replace, Prepend
  bool left = false, right = false;              // Strip
};

NormalizerChain::NormalizerChain(const json& j, const std::string& origin) {
  if (!j.is_null()) add(j, origin, 0);
}

void NormalizerChain::add(const json& j, const std::string& origin, int depth) {
  LA_CHECK(depth < kMaxNesting, origin, ": normalizers nested more than ", kMaxNesting, " deep");
  const std::string t = type_of(j, origin, "normalizer");
  auto st = std::make_shared<Step>();
  if (t == "Sequence") {
    LA_CHECK(j.contains("normalizers") && j["normalizers"].is_array(), origin,
             ": Sequence normalizer needs a \"normalizers\" array");
    for (const auto& x : j["normalizers"]) add(x, origin, depth + 1);
    return;
  } else if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") {
    st->kind = Step::Form;
    st->form = std::make_shared<text::Normalizer>(t);
  } else if (t == "Replace") {
    st->kind = Step::Replace;
    st->pattern = pattern_of(j, origin, "Replace normalizer");
    LA_CHECK(j.contains("content") && j["content"].is_string(), origin, ": Replace normalizer needs a string \"content\"");
    st->content = j["content"].get<std::string>();
  } else if (t == "Prepend") {
    st->kind = Step::Prepend;
    LA_CHECK(j.contains("prepend") && j["prepend"].is_string(), origin, ": Prepend normalizer needs a string \"prepend\"");
    st->content = j["prepend"].get<std::string>();
  } else if (t == "Strip") {
    st->kind = Step::Strip;
    st->left = flag(j, "strip_left", true, origin);
    st->right = flag(j, "strip_right", true, origin);
  } else if (t == "Lowercase") {
    st->kind = Step::Lowercase;
  } else {
    fail(origin, ": unsupported normalizer '", t,
         "' (supported: NFC, NFD, NFKC, NFKD, Replace, Prepend, Strip, Lowercase, Sequence)");
  }
  steps_.push_back(std::move(st));
}

std::string NormalizerChain::apply(const std::string& s, bool* keeps_start) const {
  std::string out = s;
  bool lost = false;
  for (const auto& st : steps_) {
    switch (st->kind) {
      case Step::Form:
        out = st->form->apply(out);
        break;
      case Step::Replace:
        out = replace_all(*st->pattern, out, st->content, &lost);
        break;
      case Step::Prepend:  // never onto an empty text
        if (!out.empty()) out.insert(0, st->content);
        break;
      case Step::Strip: {
        size_t a = 0, b = out.size();
        if (st->left)
          while (a < b) {
            size_t i = a;
            if (!text::is_white_space(text::utf8_next(out, i))) break;
            a = i, lost = true;
          }
        if (st->right)
          while (b > a) {
            size_t start = b - 1;
            while (start > a && (static_cast<unsigned char>(out[start]) & 0xC0) == 0x80) --start;
            size_t i = start;
            if (!text::is_white_space(text::utf8_next(out, i))) break;
            b = start;
          }
        out = out.substr(a, b - a);
        break;
      }
      case Step::Lowercase:
        out = text::lowercase(out);
        break;
    }
  }
  if (keeps_start) *keeps_start = !lost;
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
PreTokenizerChain::PreTokenizerChain(const json& j, const std::string& origin) {
  if (!j.is_null()) add(j, origin, 0);
}

void PreTokenizerChain::add(const json& j, const std::string& origin, int depth) {
  LA_CHECK(depth < kMaxNesting, origin, ": pre-tokenizers nested more than ", kMaxNesting, " deep");
  const std::string t = type_of(j, origin, "pre_tokenizer");
  Step st;
  if (t == "Sequence") {
    LA_CHECK(j.contains("pretokenizers") && j["pretokenizers"].is_array(), origin,
             ": Sequence pre-tokenizer needs a \"pretokenizers\" array");
    for (const auto& x : j["pretokenizers"]) add(x, origin, depth + 1);
    return;
  } else if (t == "Split") {
    st.kind = Step::Split;
    st.regex = pattern_of(j, origin, "Split pre-tokenizer");
    st.behavior = behavior_of(j, origin);
    st.invert = flag(j, "invert", false, origin);
  } else if (t == "Digits") {
    st.kind = Step::Split;
    st.regex = std::make_shared<text::Regex>(R"(\p{N})", origin + ": Digits pre-tokenizer");
    st.behavior = flag(j, "individual_digits", false, origin) ? SplitBehavior::Isolated : SplitBehavior::Contiguous;
  } else if (t == "ByteLevel") {
    st.kind = Step::ByteLevel;
    st.add_prefix_space = flag(j, "add_prefix_space", true, origin);
    if (flag(j, "use_regex", true, origin))
      st.regex = std::make_shared<text::Regex>(kGpt2Pattern, origin + ": ByteLevel pre-tokenizer");
  } else if (t == "Metaspace") {
    st.kind = Step::Metaspace;
    st.replacement = char_field(j, "replacement", "\xE2\x96\x81", origin, "Metaspace");
    st.prepend = prepend_scheme_of(j, origin);
    st.split = flag(j, "split", true, origin);
  } else {
    fail(origin, ": unsupported pre-tokenizer '", t, "' (supported: Split, Metaspace, ByteLevel, Digits, Sequence)");
  }
  steps_.push_back(std::move(st));
}

bool PreTokenizerChain::byte_level() const {
  for (const auto& s : steps_)
    if (s.kind == Step::ByteLevel) return true;
  return false;
}

void PreTokenizerChain::split(const Step& st, const Piece& piece, std::vector<Piece>& out) {
  const std::string& s = piece.text;
  struct Seg {
    size_t a, b;
    bool match;
  };
  std::vector<std::pair<size_t, size_t>> m;
  st.regex->find_all(s, m);
  std::vector<Seg> segs;  // alternating gaps and matches covering s (pattern.rs find_matches)
  size_t prev = 0;
  for (auto [a, b] : m) {
    if (prev != a) segs.push_back({prev, a, false});
    segs.push_back({a, b, true});
    prev = b;
  }
  if (prev != s.size()) segs.push_back({prev, s.size(), false});
  if (st.invert)
    for (auto& g : segs) g.match = !g.match;

  std::vector<Seg> parts;  // Seg::match now means "remove"
  bool prev_match = false;
  switch (st.behavior) {
    case SplitBehavior::Isolated:
      for (auto g : segs) parts.push_back({g.a, g.b, false});
      break;
    case SplitBehavior::Removed:
      parts.swap(segs);
      break;
    case SplitBehavior::Contiguous:
      for (auto g : segs) {
        if (g.match == prev_match && !parts.empty()) parts.back().b = g.b;
        else parts.push_back({g.a, g.b, false});
        prev_match = g.match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (auto g : segs) {
        if (g.match && !prev_match && !parts.empty()) parts.back().b = g.b;
        else parts.push_back({g.a, g.b, false});
        prev_match = g.match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->match && !prev_match && !parts.empty()) parts.back().a = it->a;
        else parts.push_back({it->a, it->b, false});
        prev_match = it->match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  for (const auto& p : parts)
    if (!p.match && p.b > p.a) out.push_back({s.substr(p.a, p.b - p.a), piece.origin && p.a == 0});
}

// metaspace.rs: every space becomes the replacement, the replacement goes in front (prepend_scheme), and with
// `split` the piece is cut before every replacement (MergedWithNext).
void PreTokenizerChain::metaspace(const Step& st, Piece p, std::vector<Piece>& out) {
  std::string s;
  s.reserve(p.text.size() + 8);
  for (char c : p.text) {
    if (c == ' ') s += st.replacement;
    else s += c;
  }
  const bool starts = s.compare(0, st.replacement.size(), st.replacement) == 0;
  if (!starts && (st.prepend == PrependScheme::Always || (st.prepend == PrependScheme::First && p.origin)))
    s.insert(0, st.replacement);
  if (!st.split) {
    out.push_back({std::move(s), p.origin});
    return;
  }
  size_t start = 0;
  for (size_t at = s.find(st.replacement, 1); at != std::string::npos; at = s.find(st.replacement, at + 1)) {
    out.push_back({s.substr(start, at - start), p.origin && start == 0});
    start = at;
  }
  out.push_back({s.substr(start), p.origin && start == 0});
}

void PreTokenizerChain::run(const std::string& text, std::vector<std::string>& out, bool at_origin) const {
  if (text.empty()) return;
  std::vector<Piece> cur{{text, at_origin}}, next;
  for (const auto& st : steps_) {
    next.clear();
    for (auto& piece : cur) {
      if (piece.text.empty()) continue;
      if (st.kind == Step::Split) {
        split(st, piece, next);
        continue;
      }
      if (st.kind == Step::Metaspace) {
        metaspace(st, std::move(piece), next);
        continue;
      }
      // ByteLevel: optional prefix space, optional GPT-2 split, then every byte becomes its table character.
      if (st.add_prefix_space && piece.text[0] != ' ') piece.text.insert(piece.text.begin(), ' ');
      const size_t first = next.size();
      if (st.regex) split(st, piece, next);
      else next.push_back(std::move(piece));
      for (size_t i = first; i < next.size(); ++i) {
        std::string mapped;
        mapped.reserve(next[i].text.size() * 2);
        for (unsigned char b : next[i].text) mapped += byte_char(b);
        next[i].text = std::move(mapped);
      }
    }
    std::swap(cur, next);
  }
  for (auto& p : cur)
    if (!p.text.empty()) out.push_back(std::move(p.text));
}

// ---------------------------------------------------------------------------------------------------------------
struct DecoderChain::Step {
  enum Kind { Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel } kind;
  std::shared_ptr<text::Regex> pattern;  // Replace
  std::string content;                   // Replace: the replacement; Strip and Metaspace: the character
  size_t start = 0, stop = 0;            // Strip
  bool drop_first = true;                // Metaspace: prepend_scheme is not "never"
};

DecoderChain::DecoderChain(const json& j, const std::string& origin) {
  if (j.is_null()) return;
  none_ = false;
  add(j, origin, 0);
}

void DecoderChain::add(const json& j, const std::string& origin, int depth) {
  LA_CHECK(depth < kMaxNesting, origin, ": decoders nested more than ", kMaxNesting, " deep");
  const std::string t = type_of(j, origin, "decoder");
  auto st = std::make_shared<Step>();
  if (t == "Sequence") {
    LA_CHECK(j.contains("decoders") && j["decoders"].is_array(), origin, ": Sequence decoder needs a \"decoders\" array");
    for (const auto& x : j["decoders"]) add(x, origin, depth + 1);
    return;
  } else if (t == "Replace") {
    st->kind = Step::Replace;
    st->pattern = pattern_of(j, origin, "Replace decoder");
    LA_CHECK(j.contains("content") && j["content"].is_string(), origin, ": Replace decoder needs a string \"content\"");
    st->content = j["content"].get<std::string>();
  } else if (t == "ByteFallback") {
    st->kind = Step::ByteFallback;
  } else if (t == "Fuse") {
    st->kind = Step::Fuse;
  } else if (t == "Strip") {
    st->kind = Step::Strip;
    st->content = char_field(j, "content", "", origin, "Strip decoder");
    st->start = count_field(j, "start", origin, "Strip decoder");
    st->stop = count_field(j, "stop", origin, "Strip decoder");
  } else if (t == "Metaspace") {
    st->kind = Step::Metaspace;
    st->content = char_field(j, "replacement", "\xE2\x96\x81", origin, "Metaspace decoder");
    st->drop_first = prepend_scheme_of(j, origin) != PrependScheme::Never;
  } else if (t == "ByteLevel") {
    st->kind = Step::ByteLevel;
  } else {
    fail(origin, ": unsupported decoder '", t,
         "' (supported: Replace, ByteFallback, Fuse, Strip, Metaspace, ByteLevel, Sequence)");
  }
  steps_.push_back(std::move(st));
}

bool DecoderChain::byte_level_only() const {
  if (none_ || steps_.empty()) return false;
  for (const auto& st : steps_)
    if (st->kind != Step::ByteLevel) return false;
  return true;
}

std::string byte_level_bytes(const std::string& tok) {
  std::string b;
  for (size_t i = 0; i < tok.size();) {
    const int v = char_byte(text::utf8_next(tok, i));
    if (v < 0) return tok;
    b += static_cast<char>(v);
  }
  return b;
}

namespace {
// "<0xAB>" -> 0xAB; -1 for any other token (byte_fallback.rs: exactly six bytes, two hex digits).
int fallback_byte(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = t[k];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// Strips up to `n` leading (or trailing) characters equal to c (strip.rs).
std::string strip_chars(const std::string& t, const std::string& c, size_t start, size_t stop) {
  std::vector<size_t> at;  // byte offset of every character, then t.size()
  for (size_t i = 0; i < t.size();) {
    at.push_back(i);
    text::utf8_next(t, i);
  }
  const size_t n = at.size();
  at.push_back(t.size());
  auto is_c = [&](size_t k) { return at[k + 1] - at[k] == c.size() && t.compare(at[k], c.size(), c) == 0; };
  size_t a = 0;
  while (a < start && a < n && is_c(a)) ++a;
  size_t b = n;
  for (size_t i = 0; i < stop && b > a && is_c(b - 1); ++i) --b;
  return t.substr(at[a], at[b] - at[a]);
}
}  // namespace

std::string DecoderChain::decode(std::vector<std::string> tokens) const {
  if (none_) {  // tokenizer/mod.rs: without a decoder the tokens are joined by spaces
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  std::vector<std::string> next;
  for (const auto& st : steps_) {
    next.clear();
    switch (st->kind) {
      case Step::Replace:
        for (auto& t : tokens) next.push_back(replace_all(*st->pattern, t, st->content, nullptr));
        break;
      case Step::ByteFallback: {
        std::string bytes;
        size_t count = 0;
        auto flush = [&] {
          if (!count) return;
          if (text::utf8_valid(bytes)) next.push_back(bytes);
          else for (size_t k = 0; k < count; ++k) next.push_back("\xEF\xBF\xBD");  // one U+FFFD per byte token
          bytes.clear();
          count = 0;
        };
        for (auto& t : tokens) {
          const int b = fallback_byte(t);
          if (b >= 0) {
            bytes += static_cast<char>(b);
            ++count;
            continue;
          }
          flush();
          next.push_back(std::move(t));
        }
        flush();
        break;
      }
      case Step::Fuse: {
        std::string all;
        for (auto& t : tokens) all += t;
        next.push_back(std::move(all));
        break;
      }
      case Step::Strip:
        for (auto& t : tokens) next.push_back(strip_chars(t, st->content, st->start, st->stop));
        break;
      case Step::Metaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string o;
          const std::string& t = tokens[i];
          for (size_t k = 0; k < t.size();) {
            if (t.compare(k, st->content.size(), st->content) == 0) {
              if (!(i == 0 && st->drop_first)) o += ' ';
              k += st->content.size();
            } else {
              o += t[k++];
            }
          }
          next.push_back(std::move(o));
        }
        break;
      case Step::ByteLevel: {  // byte_level.rs: all tokens' bytes, then lossy UTF-8 (one token)
        std::string bytes;
        for (auto& t : tokens) bytes += byte_level_bytes(t);
        next.push_back(text::utf8_repair(bytes));
        break;
      }
    }
    std::swap(tokens, next);
  }
  std::string out;
  for (auto& t : tokens) out += t;
  return out;
}

}  // namespace la::hf
