#include "lookahead/tokenizer/tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include "lookahead/model/gguf.h"
#include "lookahead/model/model_dir.h"
#include "lookahead/tokenizer/gguf_tokenizer.h"
#include "lookahead/tokenizer/tokenizer_json.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "lookahead/util/json_parse.h"
#include "text_unicode.h"

namespace la {
namespace {

class SpTokenizer : public Tokenizer {
 public:
  SpTokenizer(const ModelDir& d, int bos_id) : bos_id_(bos_id) {
    const std::string& dir = d.path();
    const std::string path = d.file("tokenizer.model");
    LA_CHECK(file_exists(path), "model directory '", dir, "' has no tokenizer.model or tokenizer.json");
    // SentencePiece reports most bad files as a status, but some by exceptions of its own (a piece of length 0
    // throws from its trie builder, found by fuzz_tokenizer_model): both are one clear error here.
    sentencepiece::util::Status st;
    try {
      st = sp_.Load(path);
    } catch (const std::exception& e) {
      fail("cannot load tokenizer '", path, "': ", e.what());
    }
    LA_CHECK(st.ok(), "cannot load tokenizer '", path, "': ", st.ToString());
    if (bos_id_ < 0) bos_id_ = sp_.bos_id();
    if (const nlohmann::json* j = d.tokenizer_config())
      if (j->contains("add_bos_token") && (*j)["add_bos_token"].is_boolean()) add_bos_ = (*j)["add_bos_token"];
  }
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int> ids;
    if (!text.empty()) {
      auto st = sp_.Encode(text, &ids);
      LA_CHECK(st.ok(), "tokenizer: cannot encode text: ", st.ToString());
    }
    std::vector<int32_t> out;
    if (add_bos_) out.push_back(bos_id_);
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::vector<int> v;
    for (auto i : ids)
      if (i >= 0 && i < sp_.GetPieceSize() && !sp_.IsControl(i)) v.push_back(i);
    std::string s;
    sp_.Decode(v, &s).IgnoreError();
    return s;
  }
  int vocab_size() const override { return sp_.GetPieceSize(); }
  std::string kind() const override { return "sentencepiece"; }

 private:
  sentencepiece::SentencePieceProcessor sp_;
  int bos_id_;
  bool add_bos_ = true;
};

class ByteTokenizer : public Tokenizer {
 public:
  explicit ByteTokenizer(int bos) : bos_(bos) {}
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> out{bos_};
    for (unsigned char c : text) out.push_back(c + 3);
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (auto i : ids)
      if (i >= 3 && i < 259) s += static_cast<char>(i - 3);
    return s;
  }
  int vocab_size() const override { return 259; }
  std::string kind() const override { return "bytes"; }
  bool bytes_per_id() const override { return true; }
  void append_bytes(int32_t id, std::string& out) const override {
    if (id >= 3 && id < 259) out += static_cast<char>(id - 3);
  }

 private:
  int bos_;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& dir, int bos_id) { return load(ModelDir(dir), bos_id); }

std::unique_ptr<Tokenizer> Tokenizer::load(const ModelDir& d, int bos_id) {
  if (is_gguf_path(d.path())) return load_gguf_tokenizer(d.path(), bos_id);  // tokenizer.ggml.* (gguf_tokenizer.cpp)
  // A directory with both files (Llama-2 style) keeps sentencepiece, which is what it was trained with.
  if (d.has("tokenizer.model") || !d.has("tokenizer.json")) return std::make_unique<SpTokenizer>(d, bos_id);
  return load_tokenizer_json(d, bos_id);
}

std::unique_ptr<Tokenizer> Tokenizer::bytes(int bos_id) { return std::make_unique<ByteTokenizer>(bos_id); }

namespace {
constexpr size_t kContextIds = 4;  // sentencepiece: ids of context decoded before the new ones
constexpr size_t kMaxHeldIds = 16; // an unfinished character is held back at most this many ids
constexpr size_t kMaxContextIds = 16;  // how far context_start may move back
const char* const kReplacement = "\xEF\xBF\xBD";  // U+FFFD
bool ends_unfinished(const std::string& s) {
  return text::utf8_incomplete_tail(s) > 0 || (s.size() >= 3 && s.compare(s.size() - 3, 3, kReplacement) == 0);
}
// Where the context kept before new ids starts in ids[0, end): the last kContextIds ids, moved back (at most
// kMaxContextIds) while their text starts with U+FFFD. A run of byte tokens (<0xE6><0x97><0xA5>) cut in the middle
// decodes to U+FFFD, and ByteFallback turns a whole run into U+FFFD when any of it is invalid, so a run that went
// on past the cut would print the next character as U+FFFD too.
size_t context_start(const Tokenizer& tok, const std::vector<int32_t>& ids, size_t end) {
  size_t from = end > kContextIds ? end - kContextIds : 0;
  const size_t lowest = end > kMaxContextIds ? end - kMaxContextIds : 0;
  while (from > lowest &&
         tok.decode(std::vector<int32_t>(ids.begin() + from, ids.begin() + end)).rfind(kReplacement, 0) == 0)
    --from;
  return from;
}
}  // namespace

TextStream::TextStream(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids, std::vector<int32_t> silent)
    : tok_(tok), silent_(std::move(silent)) {
  // Context from the end of the prompt: the first generated word keeps its leading space (sentencepiece), and a
  // character the prompt leaves unfinished completes with the first generated ids (byte-level).
  const size_t from = tok_.bytes_per_id() ? (prompt_ids.size() > kContextIds ? prompt_ids.size() - kContextIds : 0)
                                           : context_start(tok_, prompt_ids, prompt_ids.size());
  for (size_t i = from; i < prompt_ids.size(); ++i) {
    if (tok_.bytes_per_id()) tok_.append_bytes(prompt_ids[i], pending_);
    else window_.push_back(prompt_ids[i]);
  }
  pending_.erase(0, pending_.size() - text::utf8_incomplete_tail(pending_));
  read_ = window_.size();
}

std::string TextStream::push(const std::vector<int32_t>& generated) {
  for (; seen_ < generated.size(); ++seen_) {
    const int32_t id = generated[seen_];
    if (std::find(silent_.begin(), silent_.end(), id) != silent_.end()) continue;
    if (tok_.bytes_per_id()) tok_.append_bytes(id, pending_);
    else window_.push_back(id);
  }
  return tok_.bytes_per_id() ? emit_bytes(false) : emit_window(false);
}

std::string TextStream::finish() { return tok_.bytes_per_id() ? emit_bytes(true) : emit_window(true); }

std::string TextStream::emit_bytes(bool final) {
  const size_t keep = final ? 0 : text::utf8_incomplete_tail(pending_);
  std::string out = text::utf8_repair(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string TextStream::emit_window(bool final) {
  if (read_ == window_.size()) return "";
  const std::string full = tok_.decode(window_);
  if (!final && ends_unfinished(full) && window_.size() - read_ < kMaxHeldIds) return "";
  const std::string before = tok_.decode(std::vector<int32_t>(window_.begin(), window_.begin() + read_));
  std::string out = full.size() > before.size() ? full.substr(before.size()) : std::string();
  window_.erase(window_.begin(), window_.begin() + context_start(tok_, window_, window_.size()));
  read_ = window_.size();
  return out;
}

}  // namespace la
