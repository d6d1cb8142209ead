// Token trie of Zhao et al., KDD'24 ("Lookahead: An Inference Acceleration Framework for Large Language Model
// with Lossless Generation Accuracy"): a frequency-weighted trie of token branches taken from prompts and from
// generated output, queried with the sequence's last tokens to draft a tree (or parallel chains) of continuations.
// No libtorch.
//
// Documented choices
// * Frequencies. Every node carries two frequencies: `prompt` (branches inserted from the prompt of a request
//   that is still running) and `generated` (branches from accepted output). Each request's prompt insertions are
//   kept in a per-request ledger (node -> amount), so end_request(R) removes exactly R's prompt frequency (with
//   the decays applied since) even when several requests overlap. The total frequency is prompt + generated.
// * Branches. insert_branch(tokens) walks/creates the path tokens[0..n) below the (virtual, tokenless) root and
//   adds 1 to each node on the path. A node's frequency is therefore the number of branches through it, and a
//   child never has more frequency than its parent. A branch longer than branch_length is cut to branch_length.
// * Retrieval (multi-stage, accumulating). The query is the context's last q tokens, for q from
//   min(max_query, branch_length-1, context size) down to 1 (default max_query = 8). Stage q descends the trie
//   along the query; the matched node's sub-trie holds continuations of depth <= branch_length-q. Within a stage,
//   nodes are chosen best-first (priority queue; a node is selectable only once its parent is chosen) by
//   score = prompt_weight * prompt + generated_weight * generated (defaults 2.0 and 1.0), ties broken by the
//   smaller token id then by discovery order. Chosen continuations are merged by token path into one output
//   tree. If after stage q the output has fewer than decoding_length nodes, the next shorter query fills the
//   rest (its nodes rank below every node of the longer query); otherwise retrieval stops. So the threshold for
//   falling back is "fewer than decoding_length nodes". Output depth is also bounded by the caller's max_depth.
// * Modes. Hierarchical: the prefix-merged output tree. Parallel: the same selection cut into disjoint chains,
//   one per selected leaf (in selection order), each the full root-to-leaf path with shared prefixes repeated;
//   chains are emitted until decoding_length nodes in total (the last chain may be cut short).
// * Capacity. `capacity` bounds the number of nodes (virtual root excluded) after every public call. When an
//   insertion would exceed it, all frequencies decay (multiplied by `decay`, default 0.5) and nodes whose total
//   frequency falls below 1 are removed with their subtrees, repeating rounds until the trie holds at most
//   floor(prune_target * capacity) nodes minus the nodes the insertion will add (prune_target default 0.9: the
//   slack avoids a full pruning pass for every insertion when the trie is full). This is done before the
//   insertion so the new branch survives; if the branch alone exceeds the capacity the rounds run again after.
//   The rounds are computed in one pass (each node's path-minimum frequency tells how many rounds it survives).
// * State file (save/load). Binary, little-endian: magic "LATRIE\r\n" (8 bytes), u32 version (1), u32
//   branch_length (informational), u64 node count, then per node in parent-before-child order {i32 token,
//   u32 parent (0 = root, else 1 + index of an earlier record), f64 generated frequency}, then a u64 FNV-1a
//   checksum of everything before it. Only generated frequency is saved (prompt frequency belongs to this
//   process's requests; nodes with no generated frequency are not saved). save() writes "<path>.tmp.<pid>" in
//   the same directory and renames it over the path. load() replaces the trie's contents; a missing, truncated,
//   corrupt or wrong-magic/version file throws la::Error naming the file (the trie is then unchanged). After a
//   load the capacity is enforced.
// * Storage: an index-based arena (nodes appended, so a parent's index is below its children's; deletions
//   compact the arena preserving order) with first-child / next-sibling links and an open-addressing hash
//   (parent, token) -> child for O(1) descent. Not thread-safe (retrieval uses scratch buffers).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace la {

enum class TrieMode { Hierarchical, Parallel };
// "hierarchical" | "parallel"; throws la::Error otherwise.
TrieMode parse_trie_mode(const std::string& s);

struct TrieParams {
  int branch_length = 12;         // >= 1: longest branch (and so the deepest draft is branch_length-1)
  size_t capacity = 2048;         // node budget (virtual root excluded)
  double prompt_weight = 2.0;     // score weight of prompt-branch frequency
  double generated_weight = 1.0;  // score weight of generated-branch frequency
  double decay = 0.5;             // in (0, 1): frequency multiplier per pruning round
  double prune_target = 0.9;      // in (0, 1]: pruning goes down to this fraction of capacity
  int max_query = 8;              // >= 1: longest query (also capped at branch_length-1)
  void validate() const;          // throws la::Error
};

// Where a branch comes from: the prompt of request `request` (>= 0), or generated output.
struct BranchSource {
  bool prompt = false;
  int64_t request = -1;
  static BranchSource generated() { return {}; }
  static BranchSource from_prompt(int64_t request_id) { return {true, request_id}; }
};

// A drafted tree of continuations of the context's last token. parents[i] is -1 for a child of that token
// (the plan root), else the index of an earlier node.
struct TrieDraft {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;
  void clear() { tokens.clear(); parents.clear(); }
  int size() const { return static_cast<int>(tokens.size()); }
};

class TokenTrie {
 public:
  explicit TokenTrie(const TrieParams& params = {});

  const TrieParams& params() const { return params_; }

  // Adds the branch tokens[0, min(n, branch_length)): +1 frequency (prompt or generated) along the path.
  void insert_branch(const int32_t* tokens, size_t n, BranchSource source);
  void insert_branch(const std::vector<int32_t>& tokens, BranchSource source) {
    insert_branch(tokens.data(), tokens.size(), source);
  }
  // Inserts every window seq[i, min(i+branch_length, size)) for i = 0 .. size-1 (tails included).
  void insert_windows(const std::vector<int32_t>& seq, BranchSource source);
  // Removes the prompt frequency added by request `request_id` (no-op for an unknown id); nodes left with no
  // frequency are deleted.
  void end_request(int64_t request_id);

  // Drafts continuations of ctx[n-1] (see the header comment): at most decoding_length nodes, none deeper than
  // max_depth (depth 1 = child of the root). Clears `out` first.
  void retrieve(const int32_t* ctx, size_t n, int decoding_length, int max_depth, TrieMode mode,
                TrieDraft& out) const;
  void retrieve(const std::vector<int32_t>& ctx, int decoding_length, int max_depth, TrieMode mode,
                TrieDraft& out) const {
    retrieve(ctx.data(), ctx.size(), decoding_length, max_depth, mode, out);
  }
  // Sizes the retrieval scratch for drafts of up to `decoding_length` nodes once, so that no step allocates when
  // a slot first drafts larger (a batch's draft cap and the controllers change budgets mid-request). The candidate
  // heap holds each trie node at most once per query (so at most capacity + 1); it is reserved up to 4096, beyond
  // which it grows with the trie, as the trie's own nodes do.
  void reserve_retrieval(int decoding_length) const;

  void save(const std::string& path) const;
  void load(const std::string& path);
  void clear();

  size_t size() const { return nodes_.size() - 1; }  // nodes, virtual root excluded
  size_t active_requests() const { return ledgers_.size(); }
  uint64_t prune_passes() const { return prune_passes_; }  // pruning passes (each one or more decay rounds)
  uint64_t decay_rounds() const { return decay_rounds_; }

  // Introspection (tests, stats): the frequencies of the node at the end of `path` from the root.
  struct Freq {
    bool found = false;
    double prompt = 0, generated = 0;
  };
  Freq find(const std::vector<int32_t>& path) const;
  // Throws la::Error if an internal invariant is broken (capacity, links, hash, frequencies). O(size).
  void check_invariants() const;

 private:
  static constexpr uint32_t kNone = 0xffffffffu;
  struct Node {
    int32_t token;
    uint32_t parent;
    uint32_t first_child;
    uint32_t last_child;
    uint32_t next_sibling;
    double prompt;
    double generated;
  };
  struct Ledger {
    double factor = 1.0;                         // decay applied since the amounts were recorded
    std::unordered_map<uint32_t, double> added;  // node -> prompt amount (divided by factor at record time)
  };

  // (parent, token) -> child, open addressing with linear probing; entries are only added, or rebuilt.
  uint32_t child_of(uint32_t parent, int32_t token) const;
  void hash_put(uint32_t parent, int32_t token, uint32_t child);
  void hash_rebuild();
  uint32_t add_node(uint32_t parent, int32_t token);
  // Keeps the nodes with keep[i] (root always; a node whose parent goes goes too) and compacts the arena.
  void compact(std::vector<uint8_t>& keep);
  // Decay rounds until size() <= target (at least one round).
  void prune_to(size_t target);
  size_t new_nodes_for(const int32_t* tokens, size_t n) const;

  TrieParams params_;
  std::vector<Node> nodes_;  // nodes_[0] is the virtual root
  std::vector<uint64_t> hkeys_;
  std::vector<uint32_t> hvals_;
  size_t hcount_ = 0;
  std::unordered_map<int64_t, Ledger> ledgers_;
  uint64_t prune_passes_ = 0, decay_rounds_ = 0;

  // Retrieval scratch.
  struct Cand {
    double score;
    int32_t token;
    uint32_t seq;
    uint32_t node;
    int32_t out_parent;
    int32_t depth;
  };
  mutable std::vector<Cand> heap_;
  mutable std::vector<Cand> kids_;
  mutable TrieDraft tree_;
  mutable std::vector<int32_t> out_first_child_, out_next_sibling_, out_depth_;
};

}  // namespace la
