// Tokenizers: sentencepiece (tokenizer.model) for real models, a byte tokenizer for random: models.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace la {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Reads DIR/tokenizer.model (+ tokenizer_config.json for add_bos_token). Throws la::Error naming the file.
  static std::unique_ptr<Tokenizer> load(const std::string& model_dir, int bos_id);
  // Byte-level stand-in for random: models: id = byte + 3 (0 pad, 1 BOS, 2 EOS), always BOS first.
  static std::unique_ptr<Tokenizer> bytes(int bos_id);

  // Encodes text, with BOS in front when the tokenizer config asks for it.
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int vocab_size() const = 0;
  virtual std::string kind() const = 0;
};

// Incremental detokenizer for streaming: returns the text that `ids` add after what was already returned.
class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<int32_t> prompt_ids);
  std::string push(const std::vector<int32_t>& generated_so_far);

 private:
  const Tokenizer& tok_;
  std::vector<int32_t> prefix_;
  size_t emitted_ = 0;
  std::string base_;
};

}  // namespace la
