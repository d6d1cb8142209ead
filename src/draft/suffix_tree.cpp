#include "lookahead/draft/suffix_tree.h"

#include <algorithm>

#include "lookahead/util/error.h"

namespace la {
namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};

uint64_t key_of(int32_t parent, int32_t token) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | static_cast<uint32_t>(token);
}

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

SuffixTree::SuffixTree(int depth) : depth_(depth) {
  LA_CHECK(depth >= 1 && depth <= 1024, "suffix tree depth must be in [1, 1024] (got ", depth, ")");
  clear();
}

void SuffixTree::clear() {
  nodes_.clear();
  nodes_.emplace_back();  // the root
  free_.clear();
  live_ = 0;
  keys_.assign(std::max<size_t>(keys_.size(), 64), kEmpty);
  vals_.assign(keys_.size(), -1);
  hcount_ = 0;
  active_.clear();
}

size_t SuffixTree::bytes() const { return live_ * (sizeof(Node) + 2 * (sizeof(uint64_t) + sizeof(int32_t))); }

// ---- hash (parent, token) -> child: linear probing, backward-shift deletion, load <= 1/2 ----

size_t SuffixTree::slot_of(uint64_t key) const {
  const size_t mask = keys_.size() - 1;
  size_t i = mix(key) & mask;
  while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask;
  return i;
}

int32_t SuffixTree::child(int32_t parent, int32_t token) const {
  const size_t i = slot_of(key_of(parent, token));
  return keys_[i] == kEmpty ? -1 : vals_[i];
}

void SuffixTree::hash_grow() {
  std::vector<uint64_t> k(keys_.size() * 2, kEmpty);
  std::vector<int32_t> v(k.size(), -1);
  k.swap(keys_);
  v.swap(vals_);
  for (size_t j = 0; j < k.size(); ++j)
    if (k[j] != kEmpty) {
      const size_t i = slot_of(k[j]);
      keys_[i] = k[j];
      vals_[i] = v[j];
    }
}

void SuffixTree::hash_put(uint64_t key, int32_t v) {
  if ((hcount_ + 1) * 2 > keys_.size()) hash_grow();
  const size_t i = slot_of(key);
  if (keys_[i] == kEmpty) ++hcount_;
  keys_[i] = key;
  vals_[i] = v;
}

void SuffixTree::hash_erase(uint64_t key) {
  const size_t mask = keys_.size() - 1;
  size_t i = slot_of(key);
  if (keys_[i] == kEmpty) return;
  --hcount_;
  // Backward shift: move later entries of the probe run into the hole when their home slot allows it.
  for (size_t j = (i + 1) & mask; keys_[j] != kEmpty; j = (j + 1) & mask) {
    const size_t home = mix(keys_[j]) & mask;
    const bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
    if (movable) {
      keys_[i] = keys_[j];
      vals_[i] = vals_[j];
      i = j;
    }
  }
  keys_[i] = kEmpty;
  vals_[i] = -1;
}

// ---- nodes ----

int32_t SuffixTree::add_child(int32_t parent, int32_t token) {
  int32_t n;
  if (!free_.empty()) {
    n = free_.back();
    free_.pop_back();
    nodes_[n] = Node{};
  } else {
    n = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& c = nodes_[n];
  Node& p = nodes_[parent];
  c.token = token;
  c.parent = parent;
  c.depth = p.depth + 1;
  c.next = p.first_child;
  if (p.first_child >= 0) nodes_[p.first_child].prev = n;
  p.first_child = n;
  hash_put(key_of(parent, token), n);
  ++live_;
  return n;
}

void SuffixTree::free_node(int32_t n) {
  Node& c = nodes_[n];
  LA_CHECK(c.first_child < 0, "suffix tree: freeing node ", n, " that has children");
  if (c.prev >= 0) nodes_[c.prev].next = c.next;
  else nodes_[c.parent].first_child = c.next;
  if (c.next >= 0) nodes_[c.next].prev = c.prev;
  hash_erase(key_of(c.parent, c.token));
  c = Node{};
  free_.push_back(n);
  --live_;
}

void SuffixTree::append(int32_t token) {
  // Extend every open window by `token` (oldest first), then open the window that starts here.
  size_t kept = 0;
  for (size_t i = 0; i < active_.size(); ++i) {
    const int32_t a = active_[i];
    int32_t c = child(a, token);
    if (c < 0) c = add_child(a, token);
    ++nodes_[c].count;
    if (nodes_[c].depth < depth_) active_[kept++] = c;
  }
  active_.resize(kept);
  int32_t c = child(0, token);
  if (c < 0) c = add_child(0, token);
  ++nodes_[c].count;
  if (depth_ > 1) active_.push_back(c);
}

void SuffixTree::insert(const int32_t* t, size_t n) {
  start_sequence();
  for (size_t i = 0; i < n; ++i) append(t[i]);
  start_sequence();
}

void SuffixTree::remove(const int32_t* t, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    path_.clear();
    int32_t node = 0;
    const size_t end = std::min(n, i + static_cast<size_t>(depth_));
    for (size_t j = i; j < end; ++j) {
      node = child(node, t[j]);
      LA_CHECK(node >= 0 && nodes_[node].count > 0, "suffix tree: removing a sequence that was not inserted");
      --nodes_[node].count;
      path_.push_back(node);
    }
    for (size_t k = path_.size(); k-- > 0;)
      if (nodes_[path_[k]].count == 0) free_node(path_[k]);
  }
}

SuffixTree::Match SuffixTree::match(const int32_t* ctx, size_t n, int max_len) const {
  const int top = static_cast<int>(std::min<size_t>(n, static_cast<size_t>(std::min(max_len, depth_ - 1))));
  for (int len = top; len >= 1; --len) {
    int32_t node = 0;
    for (size_t j = n - static_cast<size_t>(len); j < n && node >= 0; ++j) node = child(node, ctx[j]);
    if (node >= 0 && nodes_[node].first_child >= 0) return {node, len};
  }
  return {};
}

void SuffixTree::draft(const Match& m, int max_nodes, double min_prob, int max_depth, SuffixDraft& out) {
  out.clear();
  out.match_length = m.length;
  if (m.node < 0 || m.length <= 0 || max_nodes <= 0 || max_depth <= 0) return;
  // Best first: highest path probability, then earliest pushed (deterministic).
  auto worse = [](const Cand& a, const Cand& b) { return a.prob != b.prob ? a.prob < b.prob : a.order > b.order; };
  heap_.clear();
  int64_t order = 0;
  auto push_children = [&](int32_t node, double prob, int32_t parent, int32_t depth) {
    int64_t sum = 0;
    for (int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next) sum += nodes_[c].count;
    if (sum <= 0) return;
    for (int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next) {
      const double p = prob * static_cast<double>(nodes_[c].count) / static_cast<double>(sum);
      if (p < min_prob) continue;
      heap_.push_back({p, order++, c, parent, depth});
      std::push_heap(heap_.begin(), heap_.end(), worse);
    }
  };
  push_children(m.node, 1.0, -1, 1);
  while (!heap_.empty() && out.size() < max_nodes) {
    std::pop_heap(heap_.begin(), heap_.end(), worse);
    const Cand c = heap_.back();
    heap_.pop_back();
    const int32_t idx = out.size();
    out.tokens.push_back(nodes_[c.node].token);
    out.parents.push_back(c.parent);
    out.probs.push_back(static_cast<float>(c.prob));
    out.score += c.prob;
    if (c.depth < max_depth) push_children(c.node, c.prob, idx, c.depth + 1);
  }
}

int32_t SuffixTree::count_of(const int32_t* path, size_t n) const {
  int32_t node = 0;
  for (size_t i = 0; i < n && node >= 0; ++i) node = child(node, path[i]);
  return node > 0 ? nodes_[node].count : 0;
}

void SuffixTree::check_invariants() const {
  size_t live = 0;
  std::vector<uint8_t> is_free(nodes_.size(), 0);
  for (int32_t f : free_) {
    LA_CHECK(f > 0 && static_cast<size_t>(f) < nodes_.size() && !is_free[f], "suffix tree invariant: free list");
    is_free[f] = 1;
  }
  for (size_t i = 1; i < nodes_.size(); ++i) {
    if (is_free[i]) continue;
    ++live;
    const Node& n = nodes_[i];
    LA_CHECK(n.parent >= 0 && static_cast<size_t>(n.parent) < nodes_.size() && !is_free[n.parent],
             "suffix tree invariant: node ", i, " has a bad parent");
    LA_CHECK(n.count > 0, "suffix tree invariant: node ", i, " has count ", n.count);
    LA_CHECK(n.depth == nodes_[n.parent].depth + 1 && n.depth <= depth_, "suffix tree invariant: depth of ", i);
    LA_CHECK(child(n.parent, n.token) == static_cast<int32_t>(i), "suffix tree invariant: hash misses node ", i);
    int64_t sum = 0;
    for (int32_t c = n.first_child; c >= 0; c = nodes_[c].next) {
      LA_CHECK(nodes_[c].parent == static_cast<int32_t>(i), "suffix tree invariant: sibling list of ", i);
      sum += nodes_[c].count;
    }
    LA_CHECK(sum <= n.count, "suffix tree invariant: children of ", i, " count more than it");
  }
  LA_CHECK(live == live_ && hcount_ == live_, "suffix tree invariant: ", live, " live nodes, ", live_, " counted, ",
           hcount_, " hashed");
}

}  // namespace la
