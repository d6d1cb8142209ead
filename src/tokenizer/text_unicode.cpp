// Unicode support for the tokenizer.json tokenizer: character properties and normalization come from ICU, regexes
// from PCRE2 (both Debian libraries, libicu-dev and libpcre2-dev); only UTF-8 repair is written here, because the
// exact replacement rule (one U+FFFD per maximal subpart) and the streaming boundary are ours to define.
#include "text_unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <cctype>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "lookahead/util/error.h"

namespace la::text {
namespace {

// For a lead byte: the number of continuation bytes and the allowed range of the first one (Unicode Table 3-7).
struct Lead {
  int need;
  unsigned char lo, hi;
};
Lead lead_of(unsigned char c) {
  if (c >= 0xC2 && c <= 0xDF) return {1, 0x80, 0xBF};
  if (c == 0xE0) return {2, 0xA0, 0xBF};
  if (c == 0xED) return {2, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {2, 0x80, 0xBF};
  if (c == 0xF0) return {3, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {3, 0x80, 0xBF};
  if (c == 0xF4) return {3, 0x80, 0x8F};
  return {-1, 0, 0};  // ASCII is handled before; 0x80..0xC1 and 0xF5..0xFF never start a character
}

// Bytes of the (possibly partial) sequence at s[i]: returns the count of bytes that belong to a well-formed
// prefix and whether that prefix is a whole character.
std::pair<size_t, bool> scan(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {1, true};
  const Lead l = lead_of(c);
  if (l.need < 0) return {1, false};
  size_t k = 1;
  for (int j = 0; j < l.need; ++j, ++k) {
    if (i + k >= s.size()) return {k, false};
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char lo = j == 0 ? l.lo : 0x80, hi = j == 0 ? l.hi : 0xBF;
    if (b < lo || b > hi) return {k, false};
  }
  return {k, true};
}

const icu::Normalizer2& icu_normalizer(const std::string& form) {
  UErrorCode st = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  if (form == "NFC") n = icu::Normalizer2::getNFCInstance(st);
  else if (form == "NFD") n = icu::Normalizer2::getNFDInstance(st);
  else if (form == "NFKC") n = icu::Normalizer2::getNFKCInstance(st);
  else if (form == "NFKD") n = icu::Normalizer2::getNFKDInstance(st);
  else fail("unknown normalization form '", form, "'");
  LA_CHECK(U_SUCCESS(st) && n, "ICU cannot provide the ", form, " normalizer: ", u_errorName(st));
  return *n;
}

}  // namespace

std::string utf8_repair(std::string_view s) {
  if (utf8_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    auto [k, ok] = scan(s, i);
    if (ok) out.append(s.substr(i, k));
    else out += "\xEF\xBF\xBD";
    i += k;
  }
  return out;
}

bool utf8_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    auto [k, ok] = scan(s, i);
    if (!ok) return false;
    i += k;
  }
  return true;
}

size_t utf8_incomplete_tail(std::string_view s) {
  // A character has at most 4 bytes, so an unfinished one starts within the last 3.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const size_t i = s.size() - back;
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back for its lead
    if (c < 0x80) return 0;
    auto [k, ok] = scan(s, i);
    return !ok && i + k == s.size() ? back : 0;  // well-formed so far and cut by the end
  }
  return 0;
}

char32_t utf8_next(std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  const int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
  char32_t cp = c & (0x3F >> n);
  for (int j = 1; j <= n && i + j < s.size(); ++j) cp = (cp << 6) | (static_cast<unsigned char>(s[i + j]) & 0x3F);
  i += n + 1;
  return cp;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool is_white_space(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE); }

bool is_word_char(char32_t c) {
  const auto u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL)) return true;
  switch (u_charType(u)) {
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
    case U_DECIMAL_DIGIT_NUMBER:
    case U_CONNECTOR_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {  // ASCII
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
      ++i;
      continue;
    }
    const char32_t cp = utf8_next(s, i);
    // One character alone: ICU's context-dependent rules (final sigma) see no context, as in Rust.
    icu::UnicodeString u(static_cast<UChar32>(cp));
    u.toLower(icu::Locale::getRoot());
    u.toUTF8String(out);
  }
  return out;
}

Normalizer::Normalizer(const std::string& form) : impl_(&icu_normalizer(form)) {}

std::string Normalizer::apply(std::string_view s) const {
  const auto& n = *static_cast<const icu::Normalizer2*>(impl_);
  UErrorCode st = U_ZERO_ERROR;
  const icu::StringPiece in(s.data(), static_cast<int32_t>(s.size()));
  if (n.isNormalizedUTF8(in, st) && U_SUCCESS(st)) return std::string(s);
  st = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(s.size()));
  n.normalizeUTF8(0, in, sink, nullptr, st);
  LA_CHECK(U_SUCCESS(st), "Unicode normalization failed: ", u_errorName(st));
  return out;
}

std::string Regex::quote(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u) && u >= 0x20) out += '\\';
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& pattern, const std::string& what) : what_(what) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err,
                                   &off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail(what, ": invalid regex '", pattern, "': ", reinterpret_cast<const char*>(msg), " (at offset ", off, ")");
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: without JIT, pcre2_match interprets
  code_.reset(code, [](void* c) { pcre2_code_free(static_cast<pcre2_code*>(c)); });
}

void Regex::find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  out.clear();
  auto* code = static_cast<pcre2_code*>(code_.get());
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      pcre2_match_data_create_from_pattern(code, nullptr), pcre2_match_data_free);
  LA_CHECK(md, what_, ": out of memory for regex match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  size_t last_end = SIZE_MAX;
  uint32_t opts = 0;  // the UTF check runs once, on the first call
  while (pos <= s.size()) {
    const int rc = pcre2_match(code, subject, s.size(), pos, opts, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      fail(what_, ": regex match failed: ", reinterpret_cast<const char*>(msg));
    }
    opts = PCRE2_NO_UTF_CHECK;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t st = ov[0], en = ov[1];
    LA_CHECK(st <= en && en <= s.size(), what_, ": regex produced an invalid match range");
    if (st == en && en == last_end) {  // an empty match right after the previous one: step one character
      if (pos >= s.size()) break;
      size_t next = pos;
      utf8_next(s, next);
      pos = next;
      continue;
    }
    out.emplace_back(st, en);
    last_end = en;
    pos = en;
  }
}

}  // namespace la::text
