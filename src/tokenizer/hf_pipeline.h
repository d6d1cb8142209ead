// The normalizer and pre-tokenizer stages of a Hugging Face tokenizer.json (internal to src/tokenizer), parsed from
// their JSON and run on text. Supported: normalizers NFC/NFD/NFKC/NFKD and Sequence; pre-tokenizers Split,
// ByteLevel, Digits and Sequence. Anything else is refused with an error naming it.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "text_unicode.h"

namespace la::hf {

class NormalizerChain {
 public:
  // `j` is the "normalizer" value (null: none). Throws la::Error naming `origin`.
  NormalizerChain(const nlohmann::json& j, const std::string& origin);
  bool empty() const { return forms_.empty(); }
  std::string apply(const std::string& s) const;

 private:
  void add(const nlohmann::json& j, const std::string& origin, int depth);
  std::vector<text::Normalizer> forms_;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class PreTokenizerChain {
 public:
  // `j` is the "pre_tokenizer" value (null: none). Throws la::Error naming `origin`.
  PreTokenizerChain(const nlohmann::json& j, const std::string& origin);
  // Splits one piece of text (valid UTF-8) into the pieces the BPE model sees; empty pieces are dropped.
  void run(const std::string& text, std::vector<std::string>& out) const;
  // Whether a ByteLevel stage maps bytes to the byte-level alphabet (required for byte-level BPE).
  bool byte_level() const;

 private:
  struct Step {
    enum Kind { Split, ByteLevel } kind;
    std::shared_ptr<text::Regex> regex;  // Split (and Digits), and ByteLevel with use_regex
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  void add(const nlohmann::json& j, const std::string& origin, int depth);
  static void split(const Step& st, const std::string& s, std::vector<std::string>& out);
  std::vector<Step> steps_;
};

// The GPT-2 byte-to-character table of the ByteLevel pre-tokenizer and decoder: every byte has a printable
// character; the reverse maps such characters back to bytes.
// Sequences nest at most this deep (a file nesting deeper is refused rather than recursed into).
constexpr int kMaxNesting = 32;

const std::string& byte_char(unsigned char b);  // UTF-8 of the character for byte b
int char_byte(char32_t c);                      // the byte for a table character, -1 for any other character

}  // namespace la::hf
