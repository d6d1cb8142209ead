#include "lookahead/model/safetensors.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "lookahead/util/json_parse.h"

namespace la {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
  }
  return "?";
}

size_t dtype_size(DType d) { return d == DType::F32 ? 4 : 2; }

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

class MappedFile {
 public:
  explicit MappedFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY);
    LA_CHECK(fd_ >= 0, "cannot open '", path, "': ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) { ::close(fd_); fail("cannot stat '", path, "'"); }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      if (p == MAP_FAILED) { ::close(fd_); fail("cannot map '", path, "': ", std::strerror(errno)); }
      data_ = static_cast<const uint8_t*>(p);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::string path_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

void SafetensorsCheckpoint::add_file(const std::string& file) {
  auto mf = std::make_shared<MappedFile>(file);
  LA_CHECK(mf->size() >= 8, file, ": not a safetensors file (", mf->size(), " bytes, no header length)");
  uint64_t hlen = 0;
  std::memcpy(&hlen, mf->data(), 8);
  LA_CHECK(hlen <= mf->size() - 8, file, ": safetensors header length ", hlen, " runs past the end of the file (",
           mf->size(), " bytes)");
  nlohmann::json h;
  try {
    h = parse_json(std::string_view(reinterpret_cast<const char*>(mf->data() + 8), hlen));
  } catch (const std::exception& e) {
    fail(file, ": broken safetensors header JSON (", e.what(), ")");
  }
  LA_CHECK(h.is_object(), file, ": safetensors header is not a JSON object");
  const size_t base = 8 + hlen;
  const size_t body = mf->size() - base;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& t = it.value();
    LA_CHECK(t.is_object() && t.contains("dtype") && t.contains("shape") && t.contains("data_offsets"), file,
             ": tensor '", it.key(), "' has an incomplete header entry");
    TensorView v;
    v.name = it.key();
    const std::string dt = t["dtype"].is_string() ? t["dtype"].get<std::string>() : "?";
    if (dt == "F32") v.dtype = DType::F32;
    else if (dt == "F16") v.dtype = DType::F16;
    else if (dt == "BF16") v.dtype = DType::BF16;
    else fail(file, ": tensor '", v.name, "' has unsupported dtype ", dt, " (supported: F32, F16, BF16)");
    LA_CHECK(t["shape"].is_array() && t["data_offsets"].is_array() && t["data_offsets"].size() == 2, file,
             ": tensor '", v.name, "' has a malformed shape or data_offsets");
    uint64_t n = 1;
    for (auto& s : t["shape"]) {
      LA_CHECK(s.is_number_unsigned() || (s.is_number_integer() && s.get<int64_t>() >= 0), file, ": tensor '",
               v.name, "' has a negative or non-integer dimension");
      const uint64_t d = s.get<uint64_t>();
      // Each dimension bounded too: after a zero dimension the product stays 0, and a dimension above 2^63 would
      // become a negative int64 shape entry (found by tests/fuzz).
      LA_CHECK(d <= (uint64_t(1) << 50) && (d == 0 || n <= (uint64_t(1) << 50) / d), file, ": tensor '", v.name,
               "' is absurdly large");
      n *= d;
      v.shape.push_back(static_cast<int64_t>(d));
    }
    const auto& o = t["data_offsets"];
    LA_CHECK(o[0].is_number_unsigned() && o[1].is_number_unsigned(), file, ": tensor '", v.name,
             "' has non-integer data_offsets");
    const uint64_t b = o[0].get<uint64_t>(), e = o[1].get<uint64_t>();
    LA_CHECK(b <= e && e <= body, file, ": tensor '", v.name, "' data [", b, ", ", e,
             ") lies outside the file's data section (", body, " bytes): file truncated?");
    LA_CHECK(e - b == n * dtype_size(v.dtype), file, ": tensor '", v.name, "' holds ", e - b, " bytes but its shape and ",
             dt, " need ", n * dtype_size(v.dtype));
    v.data = mf->data() + base + b;
    v.nbytes = e - b;
    LA_CHECK(tensors_.emplace(v.name, v).second, file, ": tensor '", v.name, "' appears twice");
  }
  files_.push_back(std::move(mf));
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& path) {
  SafetensorsCheckpoint ck;
  if (file_exists(path)) {
    ck.add_file(path);
    return ck;
  }
  LA_CHECK(is_directory(path), "model path '", path, "' does not exist");
  if (file_exists(path + "/model.safetensors")) {
    ck.add_file(path + "/model.safetensors");
    return ck;
  }
  const std::string idx = path + "/model.safetensors.index.json";
  LA_CHECK(file_exists(idx), "model directory '", path,
           "' has neither model.safetensors nor model.safetensors.index.json");
  const nlohmann::json j = read_json_file(idx);
  LA_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), idx, ": no weight_map");
  std::map<std::string, bool> shards;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    LA_CHECK(it.value().is_string(), idx, ": weight_map entry for '", it.key(), "' is not a file name");
    const std::string f = it.value().get<std::string>();
    LA_CHECK(f.find('/') == std::string::npos && f.find("..") == std::string::npos, idx,
             ": shard name '", f, "' must be a plain file name");
    shards[f] = true;
  }
  for (auto& [f, _] : shards) {
    LA_CHECK(file_exists(path + "/" + f), idx, ": shard '", f, "' is missing");
    ck.add_file(path + "/" + f);
  }
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it)
    LA_CHECK(ck.has(it.key()), idx, ": tensor '", it.key(), "' is not in shard ", it.value().get<std::string>());
  return ck;
}

const TensorView& SafetensorsCheckpoint::get(const std::string& name) const {
  auto it = tensors_.find(name);
  LA_CHECK(it != tensors_.end(), "checkpoint has no tensor '", name, "'");
  return it->second;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors(const ModelConfig& c) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> t;
  const int64_t H = c.hidden, I = c.intermediate, D = c.head_dim, Q = int64_t(c.heads) * D, KV = int64_t(c.kv_heads) * D;
  t.push_back({"model.embed_tokens.weight", {c.vocab, H}});
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", {H}});
    if (c.fused_qkv) {  // Phi-3
      t.push_back({p + "self_attn.qkv_proj.weight", {Q + 2 * KV, H}});
    } else {
      t.push_back({p + "self_attn.q_proj.weight", {Q, H}});
      t.push_back({p + "self_attn.k_proj.weight", {KV, H}});
      t.push_back({p + "self_attn.v_proj.weight", {KV, H}});
    }
    t.push_back({p + "self_attn.o_proj.weight", {H, Q}});
    if (c.attention_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {Q}});
      t.push_back({p + "self_attn.k_proj.bias", {KV}});
      t.push_back({p + "self_attn.v_proj.bias", {KV}});
    }
    if (c.qk_norm) {  // Qwen3, Gemma-3
      t.push_back({p + "self_attn.q_norm.weight", {D}});
      t.push_back({p + "self_attn.k_norm.weight", {D}});
    }
    t.push_back({p + "post_attention_layernorm.weight", {H}});
    if (c.sandwich_norms) {  // Gemma-2/3
      t.push_back({p + "pre_feedforward_layernorm.weight", {H}});
      t.push_back({p + "post_feedforward_layernorm.weight", {H}});
    }
    if (c.fused_qkv) {
      t.push_back({p + "mlp.gate_up_proj.weight", {2 * I, H}});
    } else {
      t.push_back({p + "mlp.gate_proj.weight", {I, H}});
      t.push_back({p + "mlp.up_proj.weight", {I, H}});
    }
    t.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  t.push_back({"model.norm.weight", {H}});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {c.vocab, H}});
  return t;
}

namespace {
// The config.json fields a tensor's expected shape comes from, so that a mismatch names them.
const char* implied_by(const std::string& n) {
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("embed_tokens") || has("lm_head")) return "vocab_size, hidden_size";
  if (has("q_norm") || has("k_norm")) return "head_dim";
  if (has("norm")) return "hidden_size";
  if (has("self_attn")) return "hidden_size, num_attention_heads, num_key_value_heads, head_dim";
  return "hidden_size, intermediate_size";
}
}  // namespace

void check_checkpoint(const SafetensorsCheckpoint& ck, const ModelConfig& c, const std::string& origin) {
  for (auto& [name, shape] : expected_tensors(c)) {
    LA_CHECK(ck.has(name), origin, ": tensor '", name, "' is missing");
    const auto& v = ck.get(name);
    if (v.shape != shape) {
      std::string a, b;
      for (auto s : v.shape) a += (a.empty() ? "" : ",") + std::to_string(s);
      for (auto s : shape) b += (b.empty() ? "" : ",") + std::to_string(s);
      fail(origin, ": tensor '", name, "' has shape [", a, "] but config.json implies [", b, "] (from ",
           implied_by(name), ")");
    }
  }
}

}  // namespace la
