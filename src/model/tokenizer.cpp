#include "lookahead/model/tokenizer.h"

#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace la {
namespace {

class SpTokenizer : public Tokenizer {
 public:
  SpTokenizer(const std::string& dir, int bos_id) : bos_id_(bos_id) {
    const std::string path = dir + "/tokenizer.model";
    LA_CHECK(file_exists(path), "model directory '", dir, "' has no tokenizer.model");
    auto st = sp_.Load(path);
    LA_CHECK(st.ok(), "cannot load tokenizer '", path, "': ", st.ToString());
    const std::string cfg = dir + "/tokenizer_config.json";
    if (file_exists(cfg)) {
      try {
        auto j = nlohmann::json::parse(read_file(cfg));
        if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean()) add_bos_ = j["add_bos_token"];
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        fail(cfg, ": invalid JSON (", e.what(), ")");
      }
    }
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

 private:
  int bos_;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& dir, int bos_id) {
  return std::make_unique<SpTokenizer>(dir, bos_id);
}

std::unique_ptr<Tokenizer> Tokenizer::bytes(int bos_id) { return std::make_unique<ByteTokenizer>(bos_id); }

TextStream::TextStream(const Tokenizer& tok, std::vector<int32_t> prompt_ids) : tok_(tok) {
  // Decode after the prompt so the first generated word keeps its leading space.
  prefix_ = std::move(prompt_ids);
  base_ = tok_.decode(prefix_);
}

std::string TextStream::push(const std::vector<int32_t>& generated) {
  auto all = prefix_;
  all.insert(all.end(), generated.begin(), generated.end());
  std::string s = tok_.decode(all);
  if (s.size() < base_.size() || s.compare(0, base_.size(), base_) != 0) return "";
  s = s.substr(base_.size());
  // Hold back an incomplete UTF-8 sequence at the end.
  size_t end = s.size();
  size_t k = 0;
  while (k < 4 && k < end && (static_cast<unsigned char>(s[end - 1 - k]) & 0xC0) == 0x80) ++k;
  if (k < end) {
    unsigned char lead = static_cast<unsigned char>(s[end - 1 - k]);
    int need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (need > static_cast<int>(k) + 1) end = end - 1 - k;
  }
  if (end <= emitted_) return "";
  std::string out = s.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

}  // namespace la
