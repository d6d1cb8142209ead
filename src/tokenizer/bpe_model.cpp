// BPE merge loop, written to give exactly the ids of Hugging Face tokenizers' BPE model (models/bpe/word.rs):
// symbols start as the piece's characters; the applicable merge of lowest rank (leftmost on ties) is applied
// one at a time from a min-heap, entries made stale by an earlier merge being skipped.
#include "bpe_model.h"

#include <cstdio>
#include <queue>

#include "lookahead/util/error.h"
#include "text_unicode.h"

namespace la {

BpeModel::BpeModel(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   const Options& opt, const std::string& origin)
    : vocab_(std::move(vocab)), opt_(opt) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t ia = id_of(a), ib = id_of(b), im = id_of(a + b);
    LA_CHECK(ia >= 0, origin, ": merge ", rank, " ('", a, "' '", b, "') names '", a, "', which is not in the vocabulary");
    LA_CHECK(ib >= 0, origin, ": merge ", rank, " ('", a, "' '", b, "') names '", b, "', which is not in the vocabulary");
    LA_CHECK(im >= 0, origin, ": merge ", rank, " ('", a, "' '", b, "') makes '", a + b,
             "', which is not in the vocabulary");
    merges_[key(ia, ib)] = {static_cast<int32_t>(rank), im};  // a repeated pair keeps its last rank, as tokenizers
  }
  if (!opt_.unk_token.empty()) {
    unk_id_ = id_of(opt_.unk_token);
    LA_CHECK(unk_id_ >= 0, origin, ": unk_token '", opt_.unk_token, "' is not in the vocabulary");
  }
}

int32_t BpeModel::id_of(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

namespace {
constexpr size_t kCacheEntries = 10000, kCachePieceBytes = 256;
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (opt_.ignore_merges) {
    if (const int32_t id = id_of(piece); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (piece.size() >= kCachePieceBytes) return merge(piece, out);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(piece); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge(piece, out);
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() < kCacheEntries) cache_.emplace(std::string(piece), std::vector<int32_t>(out.begin() + first, out.end()));
}

void BpeModel::merge(std::string_view piece, std::vector<int32_t>& out) const {
  struct Sym {
    int32_t id;
    int prev, next;
    bool gone;
  };
  std::vector<Sym> syms;
  syms.reserve(piece.size());
  auto add = [&](int32_t id) {
    const int n = static_cast<int>(syms.size());
    if (n) syms[n - 1].next = n;
    syms.push_back({id, n - 1, -1, false});
  };
  int32_t pending_unk = -1;  // an unknown run not yet emitted (fused when fuse_unk)
  for (size_t i = 0; i < piece.size();) {
    const size_t start = i;
    text::utf8_next(piece, i);
    const std::string_view ch = piece.substr(start, i - start);
    if (const int32_t id = id_of(ch); id >= 0) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(id);
      continue;
    }
    if (opt_.byte_fallback) {
      std::vector<int32_t> bytes;
      for (unsigned char b : ch) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        if (const int32_t id = id_of(name); id >= 0) bytes.push_back(id);
        else break;
      }
      if (bytes.size() == ch.size()) {
        for (auto id : bytes) add(id);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk >= 0 && !opt_.fuse_unk) add(pending_unk);
      pending_unk = unk_id_;
    }
  }
  if (pending_unk >= 0) add(pending_unk);

  struct Merge {
    int32_t rank;
    int pos;
    int32_t id;
    bool operator>(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Merge, std::vector<Merge>, std::greater<Merge>> heap;
  auto lookup = [&](int32_t a, int32_t b) -> const std::pair<int32_t, int32_t>* {
    auto it = merges_.find(key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (size_t p = 0; p + 1 < syms.size(); ++p)
    if (auto* m = lookup(syms[p].id, syms[p + 1].id)) heap.push({m->first, static_cast<int>(p), m->second});
  while (!heap.empty()) {
    const Merge top = heap.top();
    heap.pop();
    Sym& s = syms[top.pos];
    if (s.gone || s.next < 0) continue;
    const Sym right = syms[s.next];
    const auto* cur = lookup(s.id, right.id);
    if (!cur || cur->second != top.id) continue;  // stale: this pair changed since it was queued
    s.id = top.id;
    syms[s.next].gone = true;
    s.next = right.next;
    if (right.next >= 0) syms[right.next].prev = top.pos;
    if (s.prev >= 0)
      if (auto* m = lookup(syms[s.prev].id, s.id)) heap.push({m->first, s.prev, m->second});
    if (s.next >= 0)
      if (auto* m = lookup(s.id, syms[s.next].id)) heap.push({m->first, top.pos, m->second});
  }
  for (const auto& s : syms)
    if (!s.gone) out.push_back(s.id);
}

}  // namespace la
