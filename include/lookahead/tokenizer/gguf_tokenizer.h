// The tokenizer embedded in a GGUF file (tokenizer.ggml.*), built as the same objects the model directories use:
// model "llama" (SentencePiece-style: pieces, scores, token types, byte fallback) as a sentencepiece model, model
// "gpt2" (byte-level BPE: vocabulary, merges, the pre-tokenizer named by tokenizer.ggml.pre) as the tokenizer.json
// tokenizer; model "gemma4" (SentencePiece-style BPE with merges and byte fallback) as a tokenizer.json too.
// No libtorch.
#pragma once
#include <memory>
#include <string>

#include "lookahead/tokenizer/tokenizer.h"

namespace la {

class GgufFile;

// bos_id: the model's BOS (< 0: tokenizer.ggml.bos_token_id). Throws la::Error naming the file and the key.
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& f, int bos_id);
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path, int bos_id);

}  // namespace la
