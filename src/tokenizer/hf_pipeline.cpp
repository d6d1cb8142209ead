// Normalizers and pre-tokenizers of tokenizer.json, following Hugging Face tokenizers (pre_tokenizers/*.rs,
// tokenizer/normalizer.rs `split`, tokenizer/pattern.rs): a stage splits every current piece again, and pieces
// that come out empty are dropped.
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
NormalizerChain::NormalizerChain(const json& j, const std::string& origin) {
  if (!j.is_null()) add(j, origin, 0);
}

void NormalizerChain::add(const json& j, const std::string& origin, int depth) {
  LA_CHECK(depth < kMaxNesting, origin, ": normalizers nested more than ", kMaxNesting, " deep");
  const std::string t = type_of(j, origin, "normalizer");
  if (t == "Sequence") {
    LA_CHECK(j.contains("normalizers") && j["normalizers"].is_array(), origin,
             ": Sequence normalizer needs a \"normalizers\" array");
    for (const auto& x : j["normalizers"]) add(x, origin, depth + 1);
  } else if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") {
    forms_.emplace_back(t);
  } else {
    fail(origin, ": unsupported normalizer '", t, "' (supported: NFC, NFD, NFKC, NFKD, Sequence)");
  }
}

std::string NormalizerChain::apply(const std::string& s) const {
  std::string out = s;
  for (const auto& f : forms_) out = f.apply(out);
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
    LA_CHECK(j.contains("pattern") && j["pattern"].is_object() && j["pattern"].size() == 1, origin,
             ": Split pre-tokenizer needs a \"pattern\" {\"String\": ...} or {\"Regex\": ...}");
    const auto& p = j["pattern"];
    const bool is_regex = p.contains("Regex");
    LA_CHECK(is_regex || p.contains("String"), origin, ": Split pattern must be {\"String\": ...} or {\"Regex\": ...}");
    const auto& v = is_regex ? p["Regex"] : p["String"];
    LA_CHECK(v.is_string(), origin, ": Split pattern must be a string");
    const std::string pat = v.get<std::string>();
    st.kind = Step::Split;
    st.regex = std::make_shared<text::Regex>(is_regex ? pat : text::Regex::quote(pat), origin + ": Split pre-tokenizer");
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
  } else {
    fail(origin, ": unsupported pre-tokenizer '", t, "' (supported: Split, ByteLevel, Digits, Sequence)");
  }
  steps_.push_back(std::move(st));
}

bool PreTokenizerChain::byte_level() const {
  for (const auto& s : steps_)
    if (s.kind == Step::ByteLevel) return true;
  return false;
}

void PreTokenizerChain::split(const Step& st, const std::string& s, std::vector<std::string>& out) {
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
    if (!p.match && p.b > p.a) out.emplace_back(s.substr(p.a, p.b - p.a));
}

void PreTokenizerChain::run(const std::string& text, std::vector<std::string>& out) const {
  std::vector<std::string> cur{text}, next;
  for (const auto& st : steps_) {
    next.clear();
    for (auto& piece : cur) {
      if (st.kind == Step::Split) {
        split(st, piece, next);
        continue;
      }
      // ByteLevel: optional prefix space, optional GPT-2 split, then every byte becomes its table character.
      if (st.add_prefix_space && (piece.empty() || piece[0] != ' ')) piece.insert(piece.begin(), ' ');
      const size_t first = next.size();
      if (st.regex) split(st, piece, next);
      else if (!piece.empty()) next.push_back(std::move(piece));
      for (size_t i = first; i < next.size(); ++i) {
        std::string mapped;
        mapped.reserve(next[i].size() * 2);
        for (unsigned char b : next[i]) mapped += byte_char(b);
        next[i] = std::move(mapped);
      }
    }
    std::swap(cur, next);
  }
  for (auto& p : cur)
    if (!p.empty()) out.push_back(std::move(p));
}

}  // namespace la::hf
