// A step plan: what a strategy wants the one forward to compute. No libtorch, no ranks.
//
// Node 0 is the root: the last token of the sequence, not yet in the KV cache (its position is seq.size()-1).
// Every other node has a parent with a smaller index; its position is the root's position plus its depth.
// `draft[i]` says whether node i is a draft node: a token that may be accepted. Lookahead-only nodes (LADE's
// Jacobi window) are computed for their outputs but never accepted; a draft node's parent is the root or a draft
// node.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace la {

struct StepPlan {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;  // parents[0] == -1
  std::vector<uint8_t> draft;    // draft[0] == 1 (the root is always "accepted")

  void clear() { tokens.clear(); parents.clear(); draft.clear(); }
  void reset(int32_t root) { clear(); add(root, -1, true); }
  void reserve(int nodes) {
    tokens.reserve(static_cast<std::size_t>(nodes));
    parents.reserve(static_cast<std::size_t>(nodes));
    draft.reserve(static_cast<std::size_t>(nodes));
  }
  int32_t add(int32_t token, int32_t parent, bool is_draft) {
    tokens.push_back(token);
    parents.push_back(parent);
    draft.push_back(is_draft ? 1 : 0);
    return static_cast<int32_t>(tokens.size() - 1);
  }
  int size() const { return static_cast<int>(tokens.size()); }
  // depth[i]: 0 for the root, depth[parent]+1 otherwise.
  std::vector<int32_t> depths() const;
  int num_draft() const;      // draft nodes other than the root
  int num_lookahead() const;  // non-draft nodes
  // Throws la::Error if the structure is invalid.
  void validate() const;
};

// Result of verification.
struct Verdict {
  std::vector<int32_t> path;    // accepted node indices, root first
  std::vector<int32_t> tokens;  // new sequence tokens: the accepted draft tokens then the model's next token
};

// One verifier for every strategy. `results[i]` is the model's chosen next token after node i (argmax, or the
// position-keyed sample). Starting at the root, follow the draft child whose token equals the current node's
// result; stop when none does. The new tokens are the followed children's tokens plus the last node's result.
// With greedy results this is the longest root-to-node path that equals the model's argmax chain; with
// position-keyed samples it is exact speculative sampling for deterministic drafts.
// The children of a node are scanned in plan order (the first matching child wins; duplicates are harmless).
Verdict verify_plan(const StepPlan& plan, const std::vector<int32_t>& results);
// The same into `out`, whose buffers keep their capacity: no allocation per step.
void verify_plan(const StepPlan& plan, const std::vector<int32_t>& results, Verdict& out);

}  // namespace la
