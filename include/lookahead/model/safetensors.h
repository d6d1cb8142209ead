// Safetensors reading (single file or sharded with model.safetensors.index.json). No libtorch: tensors are
// views into memory-mapped files.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/model/config.h"

namespace la {

enum class DType { F32, F16, BF16 };
const char* dtype_name(DType d);
size_t dtype_size(DType d);

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
};

class MappedFile;

// All tensors of a checkpoint. Keeps the files mapped while alive.
class SafetensorsCheckpoint {
 public:
  // `path` is a .safetensors file or a model directory (model.safetensors, or the index of shards).
  static SafetensorsCheckpoint open(const std::string& path);
  // Parses one file (exposed for tests).
  void add_file(const std::string& file);
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorView& get(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }

 private:
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::map<std::string, TensorView> tensors_;
};

// Names and shapes the config expects (Hugging Face Llama naming).
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors(const ModelConfig& c);
// Checks that every expected tensor exists with the expected shape and a supported dtype; throws naming the
// first tensor that disagrees.
void check_checkpoint(const SafetensorsCheckpoint& ck, const ModelConfig& c, const std::string& origin);

}  // namespace la
