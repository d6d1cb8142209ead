// Hugging Face tokenizer.json tokenizers with a BPE model: byte-level (GPT-2, Llama-3, Qwen2/3, SmolLM2)
// and SentencePiece-style with byte fallback (Llama-2, Mistral, TinyLlama, Phi-3, Gemma-2/3). No libtorch.
#pragma once
#include <memory>
#include <string>

#include "lookahead/tokenizer/tokenizer.h"

namespace la {

// What tokenizer_config.json (and the model) add to tokenizer.json.
struct HfTokenizerConfig {
  int add_bos = -1;       // add_bos_token: 1 adds BOS in front, 0 removes a BOS the post_processor adds, -1 absent
  std::string bos_token;  // bos_token content ("": use model_bos_id)
  int model_bos_id = -1;  // the model's bos_token_id (< 0: unknown)
};

// Parses the text of a tokenizer.json. `origin` names it in errors. Anything malformed or unsupported (model
// type other than BPE, unknown normalizer, pre-tokenizer or decoder, bad regex, merges naming missing
// tokens) throws one la::Error naming `origin` and the problem; nothing else is thrown for bad input.
std::unique_ptr<Tokenizer> parse_tokenizer_json(const std::string& json_text,
                                                const std::string& origin = "tokenizer.json",
                                                const HfTokenizerConfig& config = {});

// DIR/tokenizer.json with DIR/tokenizer_config.json (if present) for add_bos_token and bos_token.
std::unique_ptr<Tokenizer> load_tokenizer_json(const ModelDir& dir, int model_bos_id);

}  // namespace la
