// The normalizer, pre-tokenizer and decoder stages of a Hugging Face tokenizer.json (internal to src/tokenizer),
// parsed from their JSON and run on text. Supported: normalizers NFC/NFD/NFKC/NFKD, Replace, Prepend, Strip,
// Lowercase and Sequence; pre-tokenizers Split, Metaspace, ByteLevel, Digits and Sequence; decoders Replace,
// ByteFallback, Fuse, Strip, Metaspace, ByteLevel and Sequence. Anything else is refused with an error naming it.
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
  bool empty() const { return steps_.empty(); }
  // `keeps_start` (if given) is set to whether the result still begins at the input's first character (false
  // when a Strip or an empty Replace removed it): Metaspace's prepend_scheme "first" depends on it.
  std::string apply(const std::string& s, bool* keeps_start = nullptr) const;

  struct Step;

 private:
  void add(const nlohmann::json& j, const std::string& origin, int depth);
  std::vector<std::shared_ptr<const Step>> steps_;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
enum class PrependScheme { Always, First, Never };

class PreTokenizerChain {
 public:
  // `j` is the "pre_tokenizer" value (null: none). Throws la::Error naming `origin`.
  PreTokenizerChain(const nlohmann::json& j, const std::string& origin);
  // Splits one piece of text (valid UTF-8) into the pieces the BPE model sees; empty pieces are dropped.
  // `at_origin`: the text starts at offset 0 of the encoded input (Metaspace "first" prepends only there).
  void run(const std::string& text, std::vector<std::string>& out, bool at_origin = true) const;
  // Whether a ByteLevel stage maps bytes to the byte-level alphabet.
  bool byte_level() const;

 private:
  struct Step {
    enum Kind { Split, ByteLevel, Metaspace } kind;
    std::shared_ptr<text::Regex> regex;  // Split (and Digits), and ByteLevel with use_regex
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;
    std::string replacement;  // Metaspace
    PrependScheme prepend = PrependScheme::Always;
    bool split = true;
  };
  struct Piece {
    std::string text;
    bool origin;  // starts at offset 0 of the input
  };
  void add(const nlohmann::json& j, const std::string& origin, int depth);
  static void split(const Step& st, const Piece& p, std::vector<Piece>& out);
  static void metaspace(const Step& st, Piece p, std::vector<Piece>& out);
  std::vector<Step> steps_;
};

// The decoder: token strings (the vocabulary's, added tokens' contents) -> text, as tokenizers'
// decoder.decode_chain followed by the join of the pieces. No decoder (null): the tokens joined by spaces.
class DecoderChain {
 public:
  DecoderChain(const nlohmann::json& j, const std::string& origin);
  // The decoder is ByteLevel alone: the text is the concatenation of every token's bytes (byte_level_bytes).
  bool byte_level_only() const;
  std::string decode(std::vector<std::string> tokens) const;

  struct Step;

 private:
  void add(const nlohmann::json& j, const std::string& origin, int depth);
  std::vector<std::shared_ptr<const Step>> steps_;
  bool none_ = true;  // no decoder at all
};

// The bytes a ByteLevel decoder gives for one token: its characters through char_byte when all are in the table,
// else the token's own UTF-8.
std::string byte_level_bytes(const std::string& token);

// Sequences nest at most this deep (a file nesting deeper is refused rather than recursed into).
constexpr int kMaxNesting = 32;

// The GPT-2 byte-to-character table of the ByteLevel pre-tokenizer and decoder: every byte has a printable
// character; the reverse maps such characters back to bytes.
const std::string& byte_char(unsigned char b);  // UTF-8 of the character for byte b
int char_byte(char32_t c);                      // the byte for a table character, -1 for any other character

}  // namespace la::hf
