#include "lookahead/draft/suffix_state.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "lookahead/util/error.h"
#include "lookahead/util/state_file.h"

namespace la {
namespace {

constexpr StateFormat kFormat{"suffix state file", "suffix", {'L', 'A', 'S', 'U', 'F', 'X', '\r', '\n'}, 1};
constexpr size_t kHeaderBytes = kStateHeaderBytes + 4 + 8 + 8;  // + vocabulary, model identity, sequence count

}  // namespace

SuffixGlobal::SuffixGlobal(int depth, int64_t max_bytes, int32_t vocab, uint64_t model)
    : tree_(depth), max_bytes_(max_bytes), vocab_(vocab), model_(model) {}

void SuffixGlobal::add(const int32_t* t, size_t n) {
  if (n == 0 || max_bytes_ <= 0) return;
  seqs_.emplace_back(t, t + n);
  seq_bytes_ += n * sizeof(int32_t);
  evict_to_bound();
}

SuffixTree& SuffixGlobal::tree() {
  while (inserted_ < seqs_.size()) {
    const std::vector<int32_t>& s = seqs_[inserted_];
    tree_.insert(s.data(), s.size());
    ++inserted_;
    evict_to_bound();  // may evict s itself (then inserted_ is 0 again and the next one is at the front)
  }
  return tree_;
}

void SuffixGlobal::evict_to_bound() {
  while (!seqs_.empty() && static_cast<int64_t>(bytes()) > max_bytes_) {
    const auto& s = seqs_.front();
    if (inserted_ > 0) {
      tree_.remove(s.data(), s.size());
      --inserted_;
    }
    seq_bytes_ -= s.size() * sizeof(int32_t);
    seqs_.pop_front();
    ++evicted_;
  }
}

void SuffixGlobal::save(const std::string& path) const {
  std::string s = begin_state(kFormat, kHeaderBytes + seq_bytes_ + 4 * seqs_.size() + kStateTrailerBytes);
  put<int32_t>(s, vocab_);
  put<uint64_t>(s, model_);
  put<uint64_t>(s, seqs_.size());
  for (const auto& q : seqs_) {
    put<uint32_t>(s, static_cast<uint32_t>(q.size()));
    for (int32_t t : q) put<int32_t>(s, t);
  }
  commit_state(kFormat, s, path);
}

void SuffixGlobal::load(const std::string& path) {
  StateFile r(kFormat, path, kHeaderBytes + kStateTrailerBytes);
  r.check_checksum();
  const int32_t vocab = r.at<int32_t>(12);
  const uint64_t model = r.at<uint64_t>(16);
  if (vocab <= 0) r.fail("invalid vocabulary size ", vocab);
  if (vocab_ > 0 && vocab != vocab_)
    r.fail("written for a vocabulary of ", vocab, " tokens, this model has ", vocab_, " (another model or tokenizer)");
  if (model_ != 0 && model != model_)
    r.fail("written for another model or tokenizer (identity differs); delete it or give another --suffix-state");
  const uint64_t count = r.at<uint64_t>(24);
  const size_t end = r.body_end();
  if (count > (end - kHeaderBytes) / 4) r.fail(count, " sequences do not fit its size");
  const std::string& s = r.bytes();
  std::deque<std::vector<int32_t>> seqs;
  size_t off = kHeaderBytes;
  for (uint64_t q = 0; q < count; ++q) {
    if (off + 4 > end) r.fail("sequence ", q, " is truncated");
    const uint32_t n = r.at<uint32_t>(off);
    off += 4;
    if (n > (end - off) / 4) r.fail("sequence ", q, " of ", n, " tokens is truncated");
    std::vector<int32_t> t(n);
    if (n > 0) std::memcpy(t.data(), s.data() + off, n * sizeof(int32_t));
    off += n * sizeof(int32_t);
    for (int32_t v : t)
      if (v < 0 || v >= vocab) r.fail("sequence ", q, " holds token ", v, " outside the vocabulary of ", vocab);
    seqs.push_back(std::move(t));
  }
  if (off != end) r.fail(end - off, " bytes after the last sequence");
  tree_.clear();
  seqs_.clear();
  inserted_ = 0;
  seq_bytes_ = 0;
  for (auto& q : seqs) add(q.data(), q.size());
}

}  // namespace la
