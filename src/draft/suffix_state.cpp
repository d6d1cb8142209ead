#include "lookahead/draft/suffix_state.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "lookahead/util/binary.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace la {
namespace {

constexpr char kMagic[8] = {'L', 'A', 'S', 'U', 'F', 'X', '\r', '\n'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;



}  // namespace

SuffixGlobal::SuffixGlobal(int depth, int64_t max_bytes, int32_t vocab, uint64_t model)
    : tree_(depth), max_bytes_(max_bytes), vocab_(vocab), model_(model) {}

void SuffixGlobal::add(const int32_t* t, size_t n) {
  if (n == 0 || max_bytes_ <= 0) return;
  seqs_.emplace_back(t, t + n);
  seq_bytes_ += n * sizeof(int32_t);
  tree_.insert(t, n);
  evict_to_bound();
}

void SuffixGlobal::evict_to_bound() {
  while (!seqs_.empty() && static_cast<int64_t>(bytes()) > max_bytes_) {
    const auto& s = seqs_.front();
    tree_.remove(s.data(), s.size());
    seq_bytes_ -= s.size() * sizeof(int32_t);
    seqs_.pop_front();
    ++evicted_;
  }
}

void SuffixGlobal::save(const std::string& path) const {
  std::string s;
  s.reserve(kHeaderBytes + seq_bytes_ + 4 * seqs_.size() + 8);
  s.append(kMagic, sizeof(kMagic));
  put<uint32_t>(s, kVersion);
  put<int32_t>(s, vocab_);
  put<uint64_t>(s, model_);
  put<uint64_t>(s, seqs_.size());
  for (const auto& q : seqs_) {
    put<uint32_t>(s, static_cast<uint32_t>(q.size()));
    for (int32_t t : q) put<int32_t>(s, t);
  }
  put<uint64_t>(s, fnv1a64(s.data(), s.size()));
  write_file_atomic(path, s, "suffix state file");
}

void SuffixGlobal::load(const std::string& path) {
  const char* what = "suffix state file";
  const std::string s = read_file(path, what);
  LA_CHECK(s.size() >= kHeaderBytes + 8, what, " '", path, "': truncated (", s.size(), " bytes)");
  LA_CHECK(std::memcmp(s.data(), kMagic, sizeof(kMagic)) == 0, what, " '", path,
           "': wrong magic (not a lookahead suffix state file)");
  const uint32_t version = get<uint32_t>(s, 8);
  LA_CHECK(version == kVersion, what, " '", path, "': unsupported version ", version, " (expected ", kVersion, ")");
  const uint64_t sum = get<uint64_t>(s, s.size() - 8);
  LA_CHECK(sum == fnv1a64(s.data(), s.size() - 8), what, " '", path, "': checksum mismatch (truncated or corrupt)");
  const int32_t vocab = get<int32_t>(s, 12);
  const uint64_t model = get<uint64_t>(s, 16);
  LA_CHECK(vocab > 0, what, " '", path, "': invalid vocabulary size ", vocab);
  LA_CHECK(vocab_ <= 0 || vocab == vocab_, what, " '", path, "': written for a vocabulary of ", vocab,
           " tokens, this model has ", vocab_, " (another model or tokenizer)");
  LA_CHECK(model_ == 0 || model == model_, what, " '", path,
           "': written for another model or tokenizer (identity differs); delete it or give another --suffix-state");
  const uint64_t count = get<uint64_t>(s, 24);
  const size_t end = s.size() - 8;
  LA_CHECK(count <= (end - kHeaderBytes) / 4, what, " '", path, "': ", count, " sequences do not fit its size");
  std::deque<std::vector<int32_t>> seqs;
  size_t off = kHeaderBytes;
  for (uint64_t q = 0; q < count; ++q) {
    LA_CHECK(off + 4 <= end, what, " '", path, "': sequence ", q, " is truncated");
    const uint32_t n = get<uint32_t>(s, off);
    off += 4;
    LA_CHECK(n <= (end - off) / 4, what, " '", path, "': sequence ", q, " of ", n, " tokens is truncated");
    std::vector<int32_t> t(n);
    if (n > 0) std::memcpy(t.data(), s.data() + off, n * sizeof(int32_t));
    off += n * sizeof(int32_t);
    for (int32_t v : t)
      LA_CHECK(v >= 0 && v < vocab, what, " '", path, "': sequence ", q, " holds token ", v,
               " outside the vocabulary of ", vocab);
    seqs.push_back(std::move(t));
  }
  LA_CHECK(off == end, what, " '", path, "': ", end - off, " bytes after the last sequence");
  tree_.clear();
  seqs_.clear();
  seq_bytes_ = 0;
  for (auto& q : seqs) add(q.data(), q.size());
}

}  // namespace la
