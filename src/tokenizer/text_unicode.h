// Unicode helpers for the tokenizer.json tokenizer (internal to src/tokenizer): UTF-8 repair and streaming
// boundaries, character properties and normalization (ICU), and regexes (PCRE2 in UTF + UCP mode).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace la::text {

// Replaces every ill-formed UTF-8 subsequence by U+FFFD, one per maximal subpart (the Unicode recommendation,
// which Python's errors="replace" and Rust's from_utf8_lossy follow). Valid input comes back unchanged.
std::string utf8_repair(std::string_view s);
bool utf8_valid(std::string_view s);
// Length of a trailing sequence that is a valid but unfinished UTF-8 character (0 if none): a stream must hold it
// back until the character completes.
size_t utf8_incomplete_tail(std::string_view s);
// Decodes the character at s[i] (s must be valid UTF-8); advances i.
char32_t utf8_next(std::string_view s, size_t& i);
void utf8_append(std::string& out, char32_t c);

// Unicode White_Space and the regex-crate `\w` class (Alphabetic, marks, decimal digits, connector punctuation,
// Join_Control), as Hugging Face tokenizers uses them for added tokens' lstrip/rstrip and single_word.
bool is_white_space(char32_t c);
bool is_word_char(char32_t c);
// Every character by its full Unicode lowercase mapping on its own (Rust's char::to_lowercase, which the Lowercase
// normalizer applies character by character: no final-sigma context, U+0130 becomes "i\u0307").
std::string lowercase(std::string_view s);

// Unicode normalization forms through ICU. `form` is "NFC", "NFD", "NFKC" or "NFKD".
class Normalizer {
 public:
  explicit Normalizer(const std::string& form);
  std::string apply(std::string_view s) const;

 private:
  const void* impl_;  // icu::Normalizer2 (a process-wide ICU singleton, not owned)
};

// A compiled PCRE2 pattern (UTF + UCP). Hugging Face tokenizers compiles its patterns with Oniguruma; for the
// constructs of tokenizer patterns (\p{L}, \p{N}, \s incl. U+0085, lookahead, (?i:...)) the two agree (tested).
class Regex {
 public:
  // Throws la::Error "<what>: invalid regex '<pattern>': <reason>".
  Regex(const std::string& pattern, const std::string& what);
  // A pattern matching `literal` verbatim.
  static std::string quote(const std::string& literal);
  // All matches, left to right, as [start, end) byte offsets, with the regex crate's rule for empty matches
  // (none directly after the previous match). Throws la::Error when PCRE2 gives up (match limits).
  void find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  std::shared_ptr<void> code_;  // pcre2_code_8
  std::string what_;
};

}  // namespace la::text
