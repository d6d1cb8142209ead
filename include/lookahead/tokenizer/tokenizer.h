// Tokenizers: sentencepiece (tokenizer.model) or Hugging Face BPE (tokenizer.json) for real models, a byte
// tokenizer for random: models.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace la {

class ModelDir;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // DIR/tokenizer.model (sentencepiece) if present, else DIR/tokenizer.json (BPE); tokenizer_config.json
  // decides add_bos_token. bos_id: the model's BOS (< 0: the tokenizer's own). Throws la::Error naming the file.
  static std::unique_ptr<Tokenizer> load(const std::string& model_dir, int bos_id);
  static std::unique_ptr<Tokenizer> load(const ModelDir& dir, int bos_id);  // its tokenizer_config.json read once
  // Byte-level stand-in for random: models: id = byte + 3 (0 pad, 1 BOS, 2 EOS), always BOS first.
  static std::unique_ptr<Tokenizer> bytes(int bos_id);

  // Encodes text as a prompt: BOS (and any other template tokens) as the tokenizer's configuration says.
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // Text of the ids. tokenizer.json: special tokens as their text (Hugging Face decode(skip_special_tokens=False)),
  // invalid UTF-8 replaced by U+FFFD. Sentencepiece: control tokens skipped.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int vocab_size() const = 0;
  virtual std::string kind() const = 0;
  // Tokenizers whose text is the concatenation of per-id bytes say so and append them here (streaming decodes
  // only new ids); others (sentencepiece) decode a short window of context ids.
  virtual bool bytes_per_id() const { return false; }
  virtual void append_bytes(int32_t id, std::string& out) const {}
};

// Incremental detokenizer for streaming: push() returns the text that the new generated ids add, decoding only
// those ids (plus a few ids of context for sentencepiece). A character split over several ids is held back until
// it completes; finish() flushes what is held (an unfinished character becomes U+FFFD). Ids in `silent` (the
// eos ids) print nothing. The concatenated pieces equal the one-shot decode of the generated ids after the prompt.
class TextStream {
 public:
  TextStream(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids, std::vector<int32_t> silent = {});
  std::string push(const std::vector<int32_t>& generated_so_far);
  std::string finish();

 private:
  std::string emit_bytes(bool final);
  std::string emit_window(bool final);
  const Tokenizer& tok_;
  std::vector<int32_t> silent_;
  size_t seen_ = 0;             // generated ids consumed so far
  std::string pending_;         // bytes_per_id: bytes of an unfinished character
  std::vector<int32_t> window_; // otherwise: context ids, then ids whose text is not yet emitted
  size_t read_ = 0;             // window_[read_:] not yet emitted
};

}  // namespace la
