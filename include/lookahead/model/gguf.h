// GGUF files (llama.cpp's single-file model format, versions 2 and 3): the header, every metadata key/value (all
// 13 value types, arrays included), the tensor infos and the aligned, memory-mapped tensor data. No libtorch.
//
// Written by hand: the only C++ reader is ggml's own (gguf.cpp inside the ggml library, which Debian ships only as
// part of llama.cpp's private libraries, with no stable API), and PyPI's `gguf` package is Python. The reader is
// strict and bounded: every count and offset is checked against the bytes that remain before anything is
// allocated, so a truncated or malformed file is one la::Error naming the file, the byte offset and the field
// ("GGUF 'm.gguf': offset 1234: metadata key 7 ('tokenizer.ggml.tokens'): string length 9e18 runs past the end
// of the file (5000 bytes)"), never a crash or a huge allocation (tests/fuzz/fuzz_gguf.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace la {

// Value types of GGUF metadata (numbers as in the file).
enum class GgufKind : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, U64 = 10, I64 = 11,
  F64 = 12,
};
const char* gguf_kind_name(GgufKind k);

// One metadata value. Scalars: integers (and bools) in `i` (u64 beyond int64's range in `u`), floats in `f`,
// strings in `s`. Arrays: `elem` is the element kind and exactly one of ints / floats / strs / items holds the
// `count` elements (items: arrays of arrays).
struct GgufValue {
  GgufKind kind = GgufKind::U8;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  GgufKind elem = GgufKind::U8;
  uint64_t count = 0;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strs;
  std::vector<GgufValue> items;
  bool is_int() const;    // an integer or bool scalar
  bool is_float() const;  // f32 / f64 scalar
};

struct GgufTensor {
  std::string name;
  uint32_t type = 0;              // ggml type number (lookahead/model/quant.h)
  std::vector<int64_t> ne;        // dimensions, innermost first (ne[0] = row length); row-major shape = reversed
  uint64_t offset = 0;            // from the start of the data section
  const uint8_t* data = nullptr;  // into the mapping
  size_t nbytes = 0;
  int64_t numel() const;
  std::vector<int64_t> shape() const;  // outermost first, as PyTorch
};

class GgufFile {
 public:
  // Maps `path` and parses it (the mapping lives as long as any copy of this object).
  static GgufFile open(const std::string& path);
  // Parses bytes already in memory (tests, fuzzing); `data` must outlive the object. `origin` names it in errors.
  static GgufFile parse(const void* data, size_t size, const std::string& origin);

  uint32_t version() const { return version_; }
  const std::string& origin() const { return origin_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufValue* find(const std::string& key) const;
  const GgufTensor* tensor(const std::string& name) const;

  // Typed reads that throw la::Error naming the file and key when the value has another kind.
  std::string get_string(const std::string& key, const std::string& def = "") const;
  int64_t get_int(const std::string& key, int64_t def) const;  // any integer kind (or bool)
  double get_float(const std::string& key, double def) const;  // any number kind
  bool get_bool(const std::string& key, bool def) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Drops the mapped file's pages from the process's resident set (madvise MADV_DONTNEED: the next read maps them
  // again from the page cache or the file); nothing for bytes given to parse(). The tensors' pointers stay valid.
  void release_pages() const;

 private:
  void parse_all(const uint8_t* p, size_t n);
  std::shared_ptr<const void> mapping_;
  size_t mapped_size_ = 0;  // open(): the mapping's length (0 for parse())
  std::string origin_;
  uint32_t version_ = 0;
  size_t alignment_ = 32, data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensor> tensors_;
};

// Whether `path` is a GGUF file: a regular file that starts with the magic "GGUF" (or, when it cannot be read,
// whose name ends in .gguf, so that the reader's error names it).
bool is_gguf_path(const std::string& path);

}  // namespace la
