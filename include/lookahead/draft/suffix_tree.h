// Suffix tree for SuffixDecoding-style drafting (Oliaro et al., NeurIPS'25): a depth-limited suffix trie with
// occurrence counts. No libtorch.
//
// Every window s[i, i+D) of every indexed sequence s (tails shorter than D included) is a root path; a node's
// count is the number of windows passing through it, i.e. how often its path occurred as a substring (within the
// depth limit). For s = a b a b c and D = 3 (counts in brackets):
//
//   root ─ a[2] ─ b[2] ─┬ a[1]        windows: a b a, b a b, a b c, b c, c
//        │              └ c[1]
//        ├ b[2] ─┬ a[1] ─ b[1]
//        │       └ c[1]
//        └ c[1]
//
// Drafting for a context ... x y: match() finds the longest suffix of the context (y, x y, ...) that is a path
// with children (here "a b" -> node b[2] under a), draft() grows a tree below that node best first: a child's
// probability is its count over the sum of its siblings' counts, a path's probability the product along it; the
// most probable candidate is taken next until the node budget is spent or the best candidate is below min_prob.
// Nodes come out in that order (a parent before its children), so a smaller budget keeps a prefix.
//
// Appending is incremental (append(): O(D) per token, the windows still open are extended by the new token),
// remove() undoes an insert() (counts drop, nodes at 0 are freed), so a global tree can evict old sequences.
// Storage is flat: nodes in one vector with a free list, children as doubly linked sibling lists, and an
// open-addressing hash (parent, token) -> child; after warm-up appends and drafts allocate nothing.
// Why hand-written: no maintained C++ library offers a counted, depth-limited suffix trie with removal that fits
// the no-allocation step loop (arctic-inference's is Python-bound and not a library).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace la {

// A draft grown below a matched node: parents index earlier entries, -1 = the matched node (the plan's root).
struct SuffixDraft {
  std::vector<int32_t> tokens, parents;
  std::vector<float> probs;  // path probability of each node
  double score = 0;          // sum of probs: the expected number of accepted tokens if counts are calibrated
  int match_length = 0;      // the context suffix that matched
  void clear() { tokens.clear(), parents.clear(), probs.clear(), score = 0, match_length = 0; }
  int size() const { return static_cast<int>(tokens.size()); }
};

class SuffixTree {
 public:
  explicit SuffixTree(int depth);
  int depth() const { return depth_; }
  void clear();  // keeps the storage
  // A new sequence starts: the next append() opens its first window.
  void start_sequence() { active_.clear(); }
  void append(int32_t token);
  void insert(const int32_t* t, size_t n);  // start_sequence(), then append() each token
  void remove(const int32_t* t, size_t n);  // undoes an earlier insert(t, n); throws la::Error if it was never in
  // Longest suffix of ctx[0, n), at most max_len tokens, whose node has children; length 0 if none.
  struct Match {
    int32_t node = -1;
    int length = 0;
  };
  Match match(const int32_t* ctx, size_t n, int max_len) const;
  // Best-first draft below m.node: at most max_nodes nodes, none deeper than max_depth below it, none with a path
  // probability below min_prob. Replaces `out`.
  void draft(const Match& m, int max_nodes, double min_prob, int max_depth, SuffixDraft& out);
  size_t size() const { return live_; }  // nodes, root excluded
  // Estimated memory of the live nodes (node record and hash slots), for the global tree's byte bound.
  size_t bytes() const;
  int32_t count_of(const int32_t* path, size_t n) const;  // count of a root path (0: absent); tests
  void check_invariants() const;                          // throws la::Error; tests and fuzzing

 private:
  struct Node {
    int32_t token = -1, parent = -1, count = 0, depth = 0;
    int32_t first_child = -1, next = -1, prev = -1;
  };
  int32_t child(int32_t parent, int32_t token) const;
  int32_t add_child(int32_t parent, int32_t token);
  void free_node(int32_t n);
  void hash_put(uint64_t key, int32_t v);
  void hash_erase(uint64_t key);
  void hash_grow();
  size_t slot_of(uint64_t key) const;

  int depth_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_;
  size_t live_ = 0;
  std::vector<uint64_t> keys_;
  std::vector<int32_t> vals_;
  size_t hcount_ = 0;
  std::vector<int32_t> active_;  // nodes of the windows still open (depth < D)
  std::vector<int32_t> path_;    // scratch of remove()
  struct Cand {
    double prob;
    int64_t order;
    int32_t node, parent, depth;
  };
  std::vector<Cand> heap_;  // scratch of draft()
};

}  // namespace la
