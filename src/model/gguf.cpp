// The GGUF reader (include/lookahead/model/gguf.h). Layout, little-endian (ggml/docs/gguf.md):
//
//   u32 magic "GGUF" | u32 version (2 or 3) | u64 tensor_count | u64 kv_count
//   kv_count x  { string key | u32 value type | value }          string = u64 length + bytes (no NUL)
//                 value: scalar | array = { u32 element type | u64 count | count x element }
//   tensor_count x { string name | u32 n_dims | n_dims x u64 ne | u32 ggml type | u64 offset }
//   padding to general.alignment (default 32) | tensor data (each offset from here, aligned)
//
// Version 1 (32-bit counts, 2023) is refused by name. Every read is bounds-checked through one Cursor that names
// the offset and the field it was reading when the bytes run out or a value is out of range.
#include "lookahead/model/gguf.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <unordered_set>

#include "lookahead/model/quant.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace la {
namespace {

constexpr int kMaxArrayDepth = 8;         // arrays of arrays nest at most this deep
constexpr uint32_t kMaxDims = 4;          // GGML_MAX_DIMS
constexpr int64_t kMaxDim = int64_t(1) << 40;
constexpr int64_t kMaxElements = int64_t(1) << 48;

size_t scalar_size(GgufKind k) {
  switch (k) {
    case GgufKind::U8: case GgufKind::I8: case GgufKind::BOOL: return 1;
    case GgufKind::U16: case GgufKind::I16: return 2;
    case GgufKind::U32: case GgufKind::I32: case GgufKind::F32: return 4;
    case GgufKind::U64: case GgufKind::I64: case GgufKind::F64: return 8;
    case GgufKind::STRING: return 8;  // at least its length
    case GgufKind::ARRAY: return 12;  // at least its element type and count
  }
  return 0;
}

bool valid_kind(uint32_t k) { return k <= 12; }

class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n, const std::string& origin) : p_(p), n_(n), origin_(origin) {}
  size_t off() const { return off_; }
  size_t left() const { return n_ - off_; }
  std::string field;  // what is being read, for errors

  template <class... A>
  [[noreturn]] void bad(size_t at, const A&... a) const {
    fail("GGUF '", origin_, "': offset ", at, ": ", field, field.empty() ? "" : ": ", a...);
  }
  void need(size_t k, const char* what) const {
    if (k > left())
      bad(off_, what, " (", k, " bytes) runs past the end of the file (", n_, " bytes)");
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + off_, sizeof(T));
    off_ += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    const size_t at = off_;
    const uint64_t len = read<uint64_t>(what);
    if (len > left())
      bad(at, what, " of length ", len, " runs past the end of the file (", n_, " bytes, ", left(), " left)");
    std::string s(reinterpret_cast<const char*>(p_ + off_), static_cast<size_t>(len));
    off_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
  const std::string& origin_;
};

void read_value(Cursor& c, GgufKind k, GgufValue& v, int depth);

void read_scalar(Cursor& c, GgufKind k, GgufValue& v) {
  v.kind = k;
  switch (k) {
    case GgufKind::U8: v.i = c.read<uint8_t>("u8 value"); break;
    case GgufKind::I8: v.i = c.read<int8_t>("i8 value"); break;
    case GgufKind::U16: v.i = c.read<uint16_t>("u16 value"); break;
    case GgufKind::I16: v.i = c.read<int16_t>("i16 value"); break;
    case GgufKind::U32: v.i = c.read<uint32_t>("u32 value"); break;
    case GgufKind::I32: v.i = c.read<int32_t>("i32 value"); break;
    case GgufKind::I64: v.i = c.read<int64_t>("i64 value"); break;
    case GgufKind::U64:
      v.u = c.read<uint64_t>("u64 value");
      v.i = v.u > uint64_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v.u);
      break;
    case GgufKind::F32: v.f = c.read<float>("f32 value"); break;
    case GgufKind::F64: v.f = c.read<double>("f64 value"); break;
    case GgufKind::BOOL: {
      const size_t at = c.off();
      const uint8_t b = c.read<uint8_t>("bool value");
      if (b > 1) c.bad(at, "bool value ", int(b), " is neither 0 nor 1");
      v.i = b;
      break;
    }
    case GgufKind::STRING: v.s = c.str("string value"); break;
    case GgufKind::ARRAY: break;  // handled by read_value
  }
  if (k != GgufKind::U64 && k != GgufKind::STRING && k != GgufKind::F32 && k != GgufKind::F64)
    v.u = static_cast<uint64_t>(v.i);
}

void read_value(Cursor& c, GgufKind k, GgufValue& v, int depth) {
  if (k != GgufKind::ARRAY) return read_scalar(c, k, v);
  v.kind = GgufKind::ARRAY;
  const size_t at = c.off();
  const uint32_t et = c.read<uint32_t>("array element type");
  if (!valid_kind(et)) c.bad(at, "array element type ", et, " is not a GGUF value type (0-12)");
  v.elem = static_cast<GgufKind>(et);
  if (v.elem == GgufKind::ARRAY && depth >= kMaxArrayDepth)
    c.bad(at, "arrays nested more than ", kMaxArrayDepth, " deep");
  const size_t cat = c.off();
  v.count = c.read<uint64_t>("array length");
  const size_t each = scalar_size(v.elem);
  if (v.count > c.left() / each)
    c.bad(cat, "array of ", v.count, " ", gguf_kind_name(v.elem), " values needs at least ", each,
          " bytes each; only ", c.left(), " bytes are left in the file");
  const size_t n = static_cast<size_t>(v.count);
  GgufValue e;
  switch (v.elem) {
    case GgufKind::STRING:
      v.strs.reserve(n);
      for (size_t i = 0; i < n; ++i) v.strs.push_back(c.str("array string"));
      break;
    case GgufKind::F32: case GgufKind::F64:
      v.floats.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        read_scalar(c, v.elem, e);
        v.floats.push_back(e.f);
      }
      break;
    case GgufKind::ARRAY:
      v.items.resize(n);
      for (size_t i = 0; i < n; ++i) read_value(c, GgufKind::ARRAY, v.items[i], depth + 1);
      break;
    default:
      v.ints.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        read_scalar(c, v.elem, e);
        v.ints.push_back(e.i);
      }
  }
}

}  // namespace

const char* gguf_kind_name(GgufKind k) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64",
                                "i64", "f64"};
  const auto i = static_cast<uint32_t>(k);
  return i <= 12 ? names[i] : "?";
}

bool GgufValue::is_int() const {
  return kind != GgufKind::F32 && kind != GgufKind::F64 && kind != GgufKind::STRING && kind != GgufKind::ARRAY;
}
bool GgufValue::is_float() const { return kind == GgufKind::F32 || kind == GgufKind::F64; }

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (auto d : ne) n *= d;
  return n;
}

std::vector<int64_t> GgufTensor::shape() const { return std::vector<int64_t>(ne.rbegin(), ne.rend()); }

void GgufFile::parse_all(const uint8_t* p, size_t n) {
  Cursor c(p, n, origin_);
  c.field = "header";
  const uint32_t magic = c.read<uint32_t>("magic");
  if (std::memcmp(&magic, "GGUF", 4) != 0) c.bad(0, "not a GGUF file (the first 4 bytes are not \"GGUF\")");
  const uint32_t version = c.read<uint32_t>("version");
  if (version == 1) c.bad(4, "GGUF version 1 (32-bit counts, 2023) is not supported; convert the file again");
  if (version == 0x02000000 || version == 0x03000000)
    c.bad(4, "a big-endian GGUF file; only little-endian files are supported");
  if (version != 2 && version != 3) c.bad(4, "unsupported GGUF version ", version, " (supported: 2, 3)");
  version_ = version;
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata key/value count");
  // Each key/value takes at least 8 (key length) + 4 (type) + 1 bytes, each tensor info 8 + 4 + 4 + 8.
  if (n_kv > c.left() / 13) c.bad(16, "metadata count ", n_kv, " cannot fit in the ", n, " bytes of the file");
  if (n_tensors > c.left() / 24) c.bad(8, "tensor count ", n_tensors, " cannot fit in the ", n, " bytes of the file");

  std::unordered_set<std::string> keys;
  kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t at = c.off();
    c.field = "metadata key " + std::to_string(i);
    std::string key = c.str("key");
    c.field += " ('" + key + "')";
    if (key.empty()) c.bad(at, "empty key");
    if (!keys.insert(key).second) c.bad(at, "duplicate key");
    const size_t tat = c.off();
    const uint32_t kind = c.read<uint32_t>("value type");
    if (!valid_kind(kind)) c.bad(tat, "value type ", kind, " is not a GGUF value type (0-12)");
    GgufValue v;
    read_value(c, static_cast<GgufKind>(kind), v, 0);
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    c.field = "metadata 'general.alignment'";
    if (!a->is_int() || a->kind == GgufKind::BOOL) c.bad(c.off(), "must be an integer, not ", gguf_kind_name(a->kind));
    if (a->i <= 0 || a->i > (1 << 20) || (a->i & (a->i - 1)) != 0)
      c.bad(c.off(), "alignment ", a->i, " is not a power of two up to 1 MiB");
    alignment_ = static_cast<size_t>(a->i);
  }

  std::unordered_set<std::string> names;
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    const size_t at = c.off();
    c.field = "tensor info " + std::to_string(i);
    t.name = c.str("name");
    c.field += " ('" + t.name + "')";
    if (!names.insert(t.name).second) c.bad(at, "duplicate tensor name");
    const size_t dat = c.off();
    const uint32_t nd = c.read<uint32_t>("dimension count");
    if (nd == 0 || nd > kMaxDims) c.bad(dat, "dimension count ", nd, " (expected 1-", kMaxDims, ")");
    int64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const size_t eat = c.off();
      const uint64_t e = c.read<uint64_t>("dimension");
      if (e == 0 || e > uint64_t(kMaxDim)) c.bad(eat, "dimension ", d, " is ", e, " (expected 1 to 2^40)");
      if (numel > kMaxElements / int64_t(e)) c.bad(eat, "more than 2^48 elements");
      numel *= int64_t(e);
      t.ne.push_back(int64_t(e));
    }
    const size_t tat = c.off();
    t.type = c.read<uint32_t>("type");
    const QTypeInfo q = qtype_info(t.type);
    if (!q.name) c.bad(tat, "tensor type ", t.type, " is not a ggml type this reader knows");
    if (t.ne[0] % q.block != 0)
      c.bad(tat, "row length ", t.ne[0], " is not a multiple of the ", q.name, " block size ", q.block);
    t.nbytes = static_cast<size_t>(numel / q.block) * size_t(q.bytes);
    const size_t oat = c.off();
    t.offset = c.read<uint64_t>("data offset");
    if (t.offset % alignment_ != 0) c.bad(oat, "data offset ", t.offset, " is not a multiple of the alignment ", alignment_);
    tensors_.push_back(std::move(t));
  }

  c.field = "tensor data";
  const size_t end_of_infos = c.off();
  data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > n)
    c.bad(end_of_infos, "the data section (at ", data_offset_, ") starts past the end of the file (", n, " bytes)");
  const size_t data_size = n_tensors > 0 ? n - data_offset_ : 0;
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail("GGUF '", origin_, "': tensor '", t.name, "' (", qtype_name(t.type), ", ", t.nbytes, " bytes at data offset ",
           t.offset, ", file offset ", data_offset_ + t.offset, ") runs past the end of the file (", n,
           " bytes): the file is truncated");
    t.data = p + data_offset_ + t.offset;
  }
}

GgufFile GgufFile::parse(const void* data, size_t size, const std::string& origin) {
  GgufFile f;
  f.origin_ = origin;
  f.parse_all(static_cast<const uint8_t*>(data), size);
  return f;
}

GgufFile GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  LA_CHECK(fd >= 0, "cannot open GGUF '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("GGUF '", path, "' is not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = nullptr;
  if (size > 0) {
    p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      fail("cannot map GGUF '", path, "': ", std::strerror(e));
    }
  }
  ::close(fd);  // the mapping stays valid
  GgufFile f;
  f.origin_ = path;
  f.mapped_size_ = p ? size : 0;
  f.mapping_ = std::shared_ptr<const void>(p, [size](const void* q) {
    if (q) ::munmap(const_cast<void*>(q), size);
  });
  static const uint8_t empty = 0;
  f.parse_all(p ? static_cast<const uint8_t*>(p) : &empty, size);
  return f;
}

void GgufFile::release_pages() const {
  // A read-only private mapping never written to: its pages are clean copies of the file's, dropped and refetched
  // on demand (advice only: a failure changes nothing but the resident size).
  if (mapped_size_ > 0) ::madvise(const_cast<void*>(mapping_.get()), mapped_size_, MADV_DONTNEED);
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : kv_)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::string GgufFile::get_string(const std::string& key, const std::string& def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  LA_CHECK(v->kind == GgufKind::STRING, "GGUF '", origin_, "': metadata '", key, "' must be a string, not ",
           gguf_kind_name(v->kind));
  return v->s;
}

int64_t GgufFile::get_int(const std::string& key, int64_t def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  LA_CHECK(v->is_int(), "GGUF '", origin_, "': metadata '", key, "' must be an integer, not ", gguf_kind_name(v->kind));
  LA_CHECK(v->kind != GgufKind::U64 || v->u <= uint64_t(INT64_MAX), "GGUF '", origin_, "': metadata '", key,
           "' is out of range (", v->u, ")");
  return v->i;
}

double GgufFile::get_float(const std::string& key, double def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  if (v->is_float()) return v->f;
  LA_CHECK(v->is_int() && v->kind != GgufKind::BOOL, "GGUF '", origin_, "': metadata '", key,
           "' must be a number, not ", gguf_kind_name(v->kind));
  return static_cast<double>(v->i);
}

bool GgufFile::get_bool(const std::string& key, bool def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  LA_CHECK(v->is_int(), "GGUF '", origin_, "': metadata '", key, "' must be a bool, not ", gguf_kind_name(v->kind));
  return v->i != 0;
}

bool is_gguf_path(const std::string& path) {
  if (path.empty() || path.rfind("random:", 0) == 0 || is_directory(path)) return false;
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
  char m[4] = {0, 0, 0, 0};
  const ssize_t got = ::read(fd, m, 4);
  ::close(fd);
  if (got == 4 && std::memcmp(m, "GGUF", 4) == 0) return true;
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

}  // namespace la
