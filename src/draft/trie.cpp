#include "lookahead/draft/trie.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "lookahead/util/error.h"
#include "lookahead/util/state_file.h"

namespace la {

namespace {

constexpr StateFormat kFormat{"trie state file", "trie", {'L', 'A', 'T', 'R', 'I', 'E', '\r', '\n'}, 1};
constexpr size_t kHeaderBytes = kStateHeaderBytes + 4 + 8;  // + branch length, node count
constexpr size_t kRecordBytes = 4 + 4 + 8;
constexpr uint64_t kEmptyKey = ~0ULL;

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
inline uint64_t hkey(uint32_t parent, int32_t token) {
  return (static_cast<uint64_t>(parent) << 32) | static_cast<uint32_t>(token);
}





}  // namespace

TrieMode parse_trie_mode(const std::string& s) {
  if (s == "hierarchical") return TrieMode::Hierarchical;
  if (s == "parallel") return TrieMode::Parallel;
  fail("trie mode must be 'hierarchical' or 'parallel' (got '", s, "')");
}

void TrieParams::validate() const {
  LA_CHECK(branch_length >= 1, "trie: branch length must be >= 1 (got ", branch_length, ")");
  LA_CHECK(capacity < 0x7fffffffu, "trie: capacity ", capacity, " is too large");
  LA_CHECK(std::isfinite(prompt_weight) && prompt_weight >= 0, "trie: prompt weight must be >= 0 (got ",
           prompt_weight, ")");
  LA_CHECK(std::isfinite(generated_weight) && generated_weight >= 0, "trie: generated weight must be >= 0 (got ",
           generated_weight, ")");
  LA_CHECK(decay > 0 && decay < 1, "trie: decay must be in (0, 1) (got ", decay, ")");
  LA_CHECK(prune_target > 0 && prune_target <= 1, "trie: prune target must be in (0, 1] (got ", prune_target, ")");
  LA_CHECK(max_query >= 1, "trie: max query length must be >= 1 (got ", max_query, ")");
}

TokenTrie::TokenTrie(const TrieParams& params) : params_(params) {
  params_.validate();
  clear();
}

void TokenTrie::clear() {
  nodes_.clear();
  nodes_.push_back(Node{-1, kNone, kNone, kNone, kNone, 0.0, 0.0});
  ledgers_.clear();
  hash_rebuild();
}

// ---------------------------------------------------------------------------------------------------------------
// Hash (parent, token) -> child.

uint32_t TokenTrie::child_of(uint32_t parent, int32_t token) const {
  const uint64_t key = hkey(parent, token);
  const size_t mask = hkeys_.size() - 1;
  for (size_t i = splitmix(key) & mask;; i = (i + 1) & mask) {
    const uint64_t k = hkeys_[i];
    if (k == key) return hvals_[i];
    if (k == kEmptyKey) return kNone;
  }
}

void TokenTrie::hash_put(uint32_t parent, int32_t token, uint32_t child) {
  if ((hcount_ + 1) * 2 > hkeys_.size()) {
    // Grow: rebuild from the arena (which already holds the new node).
    hash_rebuild();
    return;
  }
  const uint64_t key = hkey(parent, token);
  const size_t mask = hkeys_.size() - 1;
  size_t i = splitmix(key) & mask;
  while (hkeys_[i] != kEmptyKey) i = (i + 1) & mask;
  hkeys_[i] = key;
  hvals_[i] = child;
  ++hcount_;
}

void TokenTrie::hash_rebuild() {
  const size_t n = nodes_.size() - 1;
  size_t cap = 16;
  while (cap < 2 * n + 2) cap <<= 1;
  if (cap < hkeys_.size() && hkeys_.size() <= 4 * cap) cap = hkeys_.size();  // avoid shrink/grow churn
  hkeys_.assign(cap, kEmptyKey);
  hvals_.assign(cap, kNone);
  hcount_ = 0;
  const size_t mask = cap - 1;
  for (uint32_t c = 1; c < nodes_.size(); ++c) {
    const uint64_t key = hkey(nodes_[c].parent, nodes_[c].token);
    size_t i = splitmix(key) & mask;
    while (hkeys_[i] != kEmptyKey) i = (i + 1) & mask;
    hkeys_[i] = key;
    hvals_[i] = c;
    ++hcount_;
  }
}

uint32_t TokenTrie::add_node(uint32_t parent, int32_t token) {
  const uint32_t c = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(Node{token, parent, kNone, kNone, kNone, 0.0, 0.0});
  Node& p = nodes_[parent];
  if (p.last_child == kNone) p.first_child = c; else nodes_[p.last_child].next_sibling = c;
  p.last_child = c;
  hash_put(parent, token, c);
  return c;
}

// ---------------------------------------------------------------------------------------------------------------
// Insertion, elimination, pruning.

size_t TokenTrie::new_nodes_for(const int32_t* tokens, size_t n) const {
  uint32_t cur = 0;
  for (size_t i = 0; i < n; ++i) {
    cur = child_of(cur, tokens[i]);
    if (cur == kNone) return n - i;
  }
  return 0;
}

void TokenTrie::insert_branch(const int32_t* tokens, size_t n, BranchSource source) {
  n = std::min(n, static_cast<size_t>(params_.branch_length));
  if (n == 0) return;
  const size_t cap = params_.capacity;
  const size_t fresh = new_nodes_for(tokens, n);
  if (size() + fresh > cap) {
    // Make room first so the new branch is not the first victim of the decay.
    const size_t target = static_cast<size_t>(std::floor(params_.prune_target * static_cast<double>(cap)));
    prune_to(target > fresh ? target - fresh : 0);
  }
  Ledger* ledger = nullptr;
  if (source.prompt) ledger = &ledgers_[source.request];
  uint32_t cur = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t c = child_of(cur, tokens[i]);
    if (c == kNone) c = add_node(cur, tokens[i]);
    if (ledger) {
      nodes_[c].prompt += 1.0;
      ledger->added[c] += 1.0 / ledger->factor;
    } else {
      nodes_[c].generated += 1.0;
    }
    cur = c;
  }
  if (size() > cap) prune_to(cap);
}

void TokenTrie::insert_windows(const std::vector<int32_t>& seq, BranchSource source) {
  const size_t b = static_cast<size_t>(params_.branch_length);
  for (size_t i = 0; i < seq.size(); ++i) insert_branch(seq.data() + i, std::min(b, seq.size() - i), source);
}

void TokenTrie::end_request(int64_t request_id) {
  auto it = ledgers_.find(request_id);
  if (it == ledgers_.end()) return;
  const double f = it->second.factor;
  bool dead = false;
  for (const auto& [node, amount] : it->second.added) {
    Node& nd = nodes_[node];
    nd.prompt -= amount * f;
    if (nd.prompt < 1e-9) nd.prompt = 0.0;
    if (nd.prompt == 0.0 && nd.generated <= 0.0) dead = true;
  }
  ledgers_.erase(it);
  if (!dead) return;
  std::vector<uint8_t> keep(nodes_.size(), 1);
  for (size_t i = 1; i < nodes_.size(); ++i) keep[i] = (nodes_[i].prompt > 0.0 || nodes_[i].generated > 0.0) ? 1 : 0;
  compact(keep);
}

void TokenTrie::compact(std::vector<uint8_t>& keep) {
  const size_t n = nodes_.size();
  keep[0] = 1;
  std::vector<uint32_t> idx(n, kNone);
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && !keep[nodes_[i].parent]) keep[i] = 0;
    if (keep[i]) idx[i] = m++;
  }
  if (m == n) return;
  std::vector<Node> out;
  out.reserve(m);
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    Node nd = nodes_[i];
    nd.parent = i == 0 ? kNone : idx[nd.parent];
    nd.first_child = nd.last_child = nd.next_sibling = kNone;
    const uint32_t c = static_cast<uint32_t>(out.size());
    out.push_back(nd);
    if (i > 0) {
      Node& p = out[nd.parent];
      if (p.last_child == kNone) p.first_child = c; else out[p.last_child].next_sibling = c;
      p.last_child = c;
    }
  }
  nodes_.swap(out);
  for (auto& [id, led] : ledgers_) {
    std::unordered_map<uint32_t, double> remapped;
    remapped.reserve(led.added.size());
    for (const auto& [node, amount] : led.added) {
      if (idx[node] != kNone) remapped.emplace(idx[node], amount);
    }
    led.added.swap(remapped);
  }
  hash_rebuild();
}

void TokenTrie::prune_to(size_t target) {
  // Round r multiplies every frequency by `decay` and removes the nodes (with their subtrees) whose total is
  // below 1. A node survives R rounds iff every node on its path has total * decay^R >= 1, i.e. iff its
  // path-minimum total pm satisfies pm * decay^R >= 1. Count the survivors per R and apply the smallest R >= 1
  // that reaches the target, in one pass.
  const size_t n = nodes_.size();
  const double d = params_.decay;
  const double inv_log = 1.0 / std::log(1.0 / d);
  constexpr int kMaxRounds = 4096;
  std::vector<int32_t> surv(n, 0);  // rounds survived
  std::vector<double> pm(n, 0.0);
  std::vector<size_t> hist(kMaxRounds + 2, 0);
  pm[0] = std::numeric_limits<double>::infinity();
  for (size_t i = 1; i < n; ++i) {
    const double tot = nodes_[i].prompt + nodes_[i].generated;
    pm[i] = std::min(pm[nodes_[i].parent], tot);
    int s = 0;
    if (pm[i] >= 1.0) {
      double r = std::floor(std::log(pm[i]) * inv_log + 1e-9);
      s = static_cast<int>(std::min<double>(r, kMaxRounds));
      if (s < 0) s = 0;
    }
    surv[i] = s;
    ++hist[s];
  }
  // alive[R] = #nodes with surv >= R.
  size_t alive = n - 1;
  int rounds = 0;
  for (int r = 1; r <= kMaxRounds + 1; ++r) {
    alive -= hist[r - 1];
    if (alive <= target) {
      rounds = r;
      break;
    }
  }
  if (rounds == 0) rounds = kMaxRounds + 1;
  const double f = std::pow(d, rounds);
  std::vector<uint8_t> keep(n, 1);
  for (size_t i = 1; i < n; ++i) {
    keep[i] = surv[i] >= rounds ? 1 : 0;
    nodes_[i].prompt *= f;
    nodes_[i].generated *= f;
  }
  for (auto& [id, led] : ledgers_) {
    led.factor *= f;
    if (led.factor < 1e-250) {  // the amounts decayed to nothing: restart the scale
      led.factor = 1.0;
      for (auto& [node, amount] : led.added) amount = 0.0;
    }
  }
  ++prune_passes_;
  decay_rounds_ += static_cast<uint64_t>(rounds);
  compact(keep);
}

// ---------------------------------------------------------------------------------------------------------------
// Retrieval.

void TokenTrie::reserve_retrieval(int decoding_length) const {
  const size_t L = static_cast<size_t>(std::max(decoding_length, 0));
  const size_t cands = std::min<size_t>(params_.capacity + 1, 4096);
  heap_.reserve(cands);
  kids_.reserve(cands);
  tree_.tokens.reserve(L);
  tree_.parents.reserve(L);
  out_first_child_.reserve(L);
  out_next_sibling_.reserve(L);
  out_depth_.reserve(static_cast<size_t>(std::max(params_.branch_length, 1)));
}

void TokenTrie::retrieve(const int32_t* ctx, size_t n, int decoding_length, int max_depth, TrieMode mode,
                         TrieDraft& out) const {
  out.clear();
  const int B = params_.branch_length;
  if (decoding_length <= 0 || max_depth <= 0 || n == 0 || B < 2 || nodes_.size() <= 1) return;
  const size_t L = static_cast<size_t>(decoding_length);
  TrieDraft& tree = tree_;
  tree.clear();
  out_first_child_.clear();
  out_next_sibling_.clear();
  int32_t root_first = -1;  // first output child of the plan root

  const double wp = params_.prompt_weight, wg = params_.generated_weight;
  auto worse = [](const Cand& a, const Cand& b) {  // heap order: a has lower priority than b
    if (a.score != b.score) return a.score < b.score;
    if (a.token != b.token) return a.token > b.token;
    return a.seq > b.seq;
  };
  uint32_t seq = 0;
  auto first_out_child = [&](int32_t out_parent) { return out_parent < 0 ? root_first : out_first_child_[out_parent]; };
  // Pushes the children of trie node `node` (output node `out_parent`, depth `depth`), at most as many as could
  // still be chosen: the remaining budget plus the output children already there (duplicates cost nothing).
  auto push_children = [&](uint32_t node, int32_t out_parent, int32_t depth) {
    kids_.clear();
    for (uint32_t c = nodes_[node].first_child; c != kNone; c = nodes_[c].next_sibling) {
      const Node& nd = nodes_[c];
      kids_.push_back(Cand{wp * nd.prompt + wg * nd.generated, nd.token, 0, c, out_parent, depth});
    }
    size_t k = L - tree.tokens.size();
    for (int32_t o = first_out_child(out_parent); o >= 0; o = out_next_sibling_[o]) ++k;
    if (kids_.size() > k) {
      std::nth_element(kids_.begin(), kids_.begin() + static_cast<std::ptrdiff_t>(k), kids_.end(),
                       [](const Cand& a, const Cand& b) {
                         if (a.score != b.score) return a.score > b.score;
                         return a.token < b.token;
                       });
      kids_.resize(k);
    }
    for (auto& c : kids_) {
      c.seq = seq++;
      heap_.push_back(c);
      std::push_heap(heap_.begin(), heap_.end(), worse);
    }
  };

  const int qmax = static_cast<int>(std::min<size_t>({static_cast<size_t>(params_.max_query),
                                                      static_cast<size_t>(B - 1), n}));
  for (int q = qmax; q >= 1 && tree.tokens.size() < L; --q) {
    uint32_t node = 0;
    for (size_t j = n - static_cast<size_t>(q); j < n && node != kNone; ++j) node = child_of(node, ctx[j]);
    if (node == kNone || nodes_[node].first_child == kNone) continue;
    const int depth_limit = std::min(max_depth, B - q);
    heap_.clear();
    push_children(node, -1, 1);
    while (!heap_.empty() && tree.tokens.size() < L) {
      std::pop_heap(heap_.begin(), heap_.end(), worse);
      const Cand c = heap_.back();
      heap_.pop_back();
      int32_t o = first_out_child(c.out_parent);
      while (o >= 0 && tree.tokens[o] != c.token) o = out_next_sibling_[o];
      if (o < 0) {
        o = static_cast<int32_t>(tree.tokens.size());
        tree.tokens.push_back(c.token);
        tree.parents.push_back(c.out_parent);
        out_first_child_.push_back(-1);
        out_next_sibling_.push_back(-1);
        // Link as the last output child of its parent (keeps children in selection order).
        int32_t* link = c.out_parent < 0 ? &root_first : &out_first_child_[c.out_parent];
        while (*link >= 0) link = &out_next_sibling_[*link];
        *link = o;
      }
      if (c.depth < depth_limit && nodes_[c.node].first_child != kNone && tree.tokens.size() < L) {
        push_children(c.node, o, c.depth + 1);
      }
    }
  }

  if (mode == TrieMode::Hierarchical) {
    out.tokens = tree.tokens;
    out.parents = tree.parents;
    return;
  }
  // Parallel: one chain per leaf (in selection order), shared prefixes repeated, cut at the budget.
  std::vector<int32_t>& path = out_depth_;
  for (int32_t leaf = 0; leaf < tree.size() && out.tokens.size() < L; ++leaf) {
    if (out_first_child_[leaf] >= 0) continue;
    path.clear();
    for (int32_t x = leaf; x >= 0; x = tree.parents[x]) path.push_back(tree.tokens[x]);
    int32_t parent = -1;
    for (auto it = path.rbegin(); it != path.rend() && out.tokens.size() < L; ++it) {
      out.tokens.push_back(*it);
      out.parents.push_back(parent);
      parent = static_cast<int32_t>(out.tokens.size()) - 1;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Introspection.

TokenTrie::Freq TokenTrie::find(const std::vector<int32_t>& path) const {
  Freq f;
  uint32_t cur = 0;
  for (int32_t t : path) {
    cur = child_of(cur, t);
    if (cur == kNone) return f;
  }
  f.found = true;
  f.prompt = nodes_[cur].prompt;
  f.generated = nodes_[cur].generated;
  return f;
}

void TokenTrie::check_invariants() const {
  LA_CHECK(size() <= params_.capacity, "trie invariant: ", size(), " nodes exceed the capacity ", params_.capacity);
  LA_CHECK(hcount_ == size(), "trie invariant: hash holds ", hcount_, " entries for ", size(), " nodes");
  std::vector<size_t> kids(nodes_.size(), 0);
  for (uint32_t i = 1; i < nodes_.size(); ++i) {
    const Node& nd = nodes_[i];
    LA_CHECK(nd.parent < i, "trie invariant: node ", i, " has parent ", nd.parent);
    LA_CHECK(child_of(nd.parent, nd.token) == i, "trie invariant: hash does not find node ", i);
    LA_CHECK(nd.prompt >= 0 && nd.generated >= 0 && nd.prompt + nd.generated > 0,
             "trie invariant: node ", i, " has frequencies ", nd.prompt, "/", nd.generated);
    if (nd.parent > 0) {
      const Node& p = nodes_[nd.parent];
      const double pt = p.prompt + p.generated, ct = nd.prompt + nd.generated;
      LA_CHECK(ct <= pt * (1 + 1e-9) + 1e-9, "trie invariant: node ", i, " has more frequency (", ct,
               ") than its parent (", pt, ")");
    }
    ++kids[nd.parent];
  }
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    size_t k = 0;
    uint32_t last = kNone;
    for (uint32_t c = nodes_[i].first_child; c != kNone; c = nodes_[c].next_sibling) {
      LA_CHECK(nodes_[c].parent == i, "trie invariant: child list of ", i, " holds node ", c);
      LA_CHECK(++k <= kids[i], "trie invariant: child list of ", i, " is too long (cycle?)");
      last = c;
    }
    LA_CHECK(k == kids[i] && last == nodes_[i].last_child, "trie invariant: child list of ", i, " is broken");
  }
  for (const auto& [id, led] : ledgers_) {
    for (const auto& [node, amount] : led.added) {
      LA_CHECK(node > 0 && node < nodes_.size(), "trie invariant: ledger of request ", id, " names node ", node);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// State file.

void TokenTrie::save(const std::string& path) const {
  const size_t n = nodes_.size();
  std::vector<uint32_t> idx(n, kNone);
  idx[0] = 0;
  uint64_t count = 0;
  for (size_t i = 1; i < n; ++i) {
    const Node& nd = nodes_[i];
    if (nd.generated > 0.0 && idx[nd.parent] != kNone) idx[i] = static_cast<uint32_t>(++count);
  }
  std::string s = begin_state(kFormat, kHeaderBytes + count * kRecordBytes + kStateTrailerBytes);
  put<uint32_t>(s, static_cast<uint32_t>(params_.branch_length));
  put<uint64_t>(s, count);
  for (size_t i = 1; i < n; ++i) {
    if (idx[i] == kNone) continue;
    put<int32_t>(s, nodes_[i].token);
    put<uint32_t>(s, idx[nodes_[i].parent]);
    put<double>(s, nodes_[i].generated);
  }
  commit_state(kFormat, s, path);
}

void TokenTrie::load(const std::string& path) {
  StateFile r(kFormat, path, kHeaderBytes + kStateTrailerBytes);
  const size_t bytes = r.bytes().size();
  const uint64_t count = r.at<uint64_t>(16);
  if (count > (bytes - kHeaderBytes - kStateTrailerBytes) / kRecordBytes ||
      bytes != kHeaderBytes + count * kRecordBytes + kStateTrailerBytes)
    r.fail("size ", bytes, " bytes does not match its ", count, " nodes (truncated?)");
  r.check_checksum();

  TokenTrie fresh(params_);
  fresh.nodes_.reserve(count + 1);
  for (uint64_t i = 0; i < count; ++i) {
    const size_t off = kHeaderBytes + i * kRecordBytes;
    const int32_t token = r.at<int32_t>(off);
    const uint32_t parent = r.at<uint32_t>(off + 4);
    const double gen = r.at<double>(off + 8);
    if (token < 0) r.fail("node ", i, " has invalid token ", token);
    if (parent > i) r.fail("node ", i, " has invalid parent ", parent);
    if (!(std::isfinite(gen) && gen > 0)) r.fail("node ", i, " has invalid frequency ", gen);
    if (fresh.child_of(parent, token) != kNone) r.fail("node ", i, " duplicates a sibling");
    if (!(parent == 0 || gen <= fresh.nodes_[parent].generated * (1 + 1e-12)))
      r.fail("node ", i, " has more frequency than its parent");
    const uint32_t c = fresh.add_node(parent, token);
    fresh.nodes_[c].generated = gen;
  }
  nodes_.swap(fresh.nodes_);
  hkeys_.swap(fresh.hkeys_);
  hvals_.swap(fresh.hvals_);
  hcount_ = fresh.hcount_;
  ledgers_.clear();
  if (size() > params_.capacity) prune_to(params_.capacity);
}

}  // namespace la
