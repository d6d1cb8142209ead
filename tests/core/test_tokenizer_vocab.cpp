// The GGUF tokenizers (src/tokenizer/gguf_tokenizer.cpp) on real vocabularies against Hugging Face's ids: llama.cpp's
// vocabulary-only test files ggml-vocab-NAME.gguf (tokenizer.ggml.* metadata, no tensors), NAME.gguf.inp (test
// strings separated by "\n__ggml_vocab_test__\n") and NAME.gguf.out (one line of space-separated ids per string,
// written by transformers' AutoTokenizer(...).encode(text, add_special_tokens=False) in llama.cpp's
// convert_hf_to_gguf_update.py). launch/setup.sh --test-deps copies them from the pinned llama-cpp-python sdist into
// $LOOKAHEAD_DEPS/vocab/ (LOOKAHEAD_VOCAB_DIR overrides); a test skips with a message when its files are absent.
//
// Every vocabulary of that folder is listed below: either we claim it and every string must give HF's ids token by
// token, or it is refused by name (an unsupported tokenizer.ggml.pre or tokenizer.ggml.model is one la::Error that
// names it, never a silent mis-tokenization). Refused here: bert-bge (tokenizer model bert, WordPiece).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "lookahead/tokenizer/gguf_tokenizer.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

using namespace la;

namespace {

struct VocabCase {
  const char* name;     // ggml-vocab-NAME.gguf
  const char* refused;  // nullptr: supported; else what the load error must name
};

std::ostream& operator<<(std::ostream& os, const VocabCase& c) { return os << c.name; }

const VocabCase kVocabs[] = {
    {"llama-spm", nullptr},   // Llama-2 / Mistral SentencePiece (byte fallback)
    {"phi-3", nullptr},       // SentencePiece
    {"qwen2", nullptr},       // byte-level BPE, pre qwen2
    {"llama-bpe", nullptr},   // Llama-3 byte-level BPE, pre llama-bpe
    {"qwen35", nullptr},      // byte-level BPE, pre qwen35
    {"gpt-2", nullptr},       // byte-level BPE, the GPT-2 default pre-tokenizer
    {"starcoder", nullptr},   // byte-level BPE, digits split one by one
    {"refact", nullptr},      // same pre-tokenizer as starcoder
    {"command-r", nullptr},   // starcoder's pre-tokenizer after NFC
    {"mpt", nullptr},         // GPT-NeoX's tokenizer: GPT-2's pre-tokenizer after NFC
    {"deepseek-llm", nullptr},    // a sequence of Splits
    {"deepseek-coder", nullptr},  // a sequence of Splits
    {"falcon", nullptr},          // punctuation, GPT-2's pattern, digit triples
    {"gemma-4", nullptr},       // SentencePiece-style BPE (tokenizer model gemma4)
    {"bert-bge", "unsupported tokenizer model 'bert'"},
};

std::string vocab_dir() {
  if (const char* d = std::getenv("LOOKAHEAD_VOCAB_DIR")) return d;
  if (const char* d = std::getenv("LOOKAHEAD_DEPS")) return std::string(d) + "/vocab";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/lookahead/vocab";
}

// The test strings as llama.cpp's test-tokenizer-0 splits them (a trailing separator ends the list).
std::vector<std::string> read_inputs(const std::string& path) {
  const std::string raw = read_file(path), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> v;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      v.push_back(raw.substr(pos));
      break;
    }
    v.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return v;
}

std::vector<std::vector<int32_t>> read_outputs(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<std::vector<int32_t>> v;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    v.emplace_back();
    for (long id; ls >> id;) v.back().push_back(static_cast<int32_t>(id));
  }
  return v;
}

std::string show(const std::string& s) {  // printable, bytes >= 0x80 kept (the terminal shows UTF-8)
  std::string o;
  for (unsigned char c : s) {
    if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c < 0x20) o += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else o += char(c);
  }
  return o.size() > 120 ? o.substr(0, 120) + "..." : o;
}

// ids[from, from + 24) (the list is long for the last, long test string).
std::string show(const std::vector<int32_t>& ids, size_t from) {
  std::string o = from ? "[... " : "[";
  const size_t to = std::min(ids.size(), from + 24);
  for (size_t i = from; i < to; ++i) o += (i > from ? " " : "") + std::to_string(ids[i]);
  return o + (to < ids.size() ? " ...]" : "]");
}
std::string show(const std::vector<int32_t>& ids) { return show(ids, 0); }

class VocabFiles : public ::testing::TestWithParam<VocabCase> {};

TEST_P(VocabFiles, IdsEqualHuggingFace) {
  const VocabCase& c = GetParam();
  const std::string base = vocab_dir() + "/ggml-vocab-" + c.name + ".gguf";
  for (const std::string& f : {base, base + ".inp", base + ".out"})
    if (!file_exists(f))
      GTEST_SKIP() << "no " << f << " (launch/setup.sh --test-deps puts llama.cpp's vocab files there)";

  std::unique_ptr<Tokenizer> tok;
  std::string error;
  try {
    tok = load_gguf_tokenizer(base, -1);
  } catch (const Error& e) {
    error = e.what();
  }
  if (c.refused) {
    ASSERT_FALSE(tok) << c.name << ": expected a refusal naming \"" << c.refused << "\", but it loaded";
    EXPECT_NE(error.find(c.refused), std::string::npos) << c.name << ": refused, but with: " << error;
    std::cout << "vocab " << c.name << ": refused (" << error << ")\n";
    return;
  }
  ASSERT_TRUE(tok) << c.name << ": " << error;

  const auto inputs = read_inputs(base + ".inp");
  const auto expected = read_outputs(base + ".out");
  ASSERT_EQ(inputs.size(), expected.size()) << base << ": .inp and .out hold different numbers of strings";
  ASSERT_FALSE(inputs.empty());
  // HF's ids were made with add_special_tokens=False: drop what our encode puts in front of every text (BOS when
  // the vocabulary's add_bos_token says so), i.e. the ids of the empty text.
  const std::vector<int32_t> prefix = tok->encode("");
  size_t equal = 0;
  std::string diffs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int32_t> got = tok->encode(inputs[i]);
    ASSERT_TRUE(got.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), got.begin()))
        << c.name << ": string " << i << " does not start with the empty text's ids " << show(prefix);
    got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(prefix.size()));
    if (got == expected[i]) {
      ++equal;
    } else {
      size_t k = 0;  // the first differing token
      while (k < got.size() && k < expected[i].size() && got[k] == expected[i][k]) ++k;
      const size_t from = k > 4 ? k - 4 : 0;
      diffs += "  string " + std::to_string(i) + " '" + show(inputs[i]) + "': first difference at token " +
               std::to_string(k) + " (HF " + std::to_string(expected[i].size()) + " tokens, ours " +
               std::to_string(got.size()) + ")\n    HF:   " + show(expected[i], from) + "\n    ours: " +
               show(got, from) + "\n";
    }
  }
  std::cout << "vocab " << c.name << " (" << tok->kind() << "): " << equal << "/" << inputs.size()
            << " strings equal\n";
  EXPECT_EQ(equal, inputs.size()) << c.name << ": " << equal << "/" << inputs.size() << " strings equal; differing:\n"
                                  << diffs;
}

std::string case_name(const ::testing::TestParamInfo<VocabCase>& i) {
  std::string n = i.param.name;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocab, VocabFiles, ::testing::ValuesIn(kVocabs), case_name);

}  // namespace
