// Splitting one step plan across K model replicas (lookahead parallelism). No libtorch, no MPI.
//
// Every part is itself a valid StepPlan whose node 0 is the plan's root and which holds whole root-to-node paths:
// a node's ancestors are copied into every part that holds the node (a node attends to its ancestors, so a replica
// can only compute a node if it also computes the node's whole path). `global[i]` is the plan index of part node i.
// Every plan node is in at least one part, so merging the parts' results gives a result for every plan node, and
// verify_plan on the merged results is exactly verify_plan on the whole plan.
//
// Splitting rule (works for any tree; see partition.cpp for the details):
//  1. Units. Start with one unit per child of the root (a unit = a subtree plus the path from the root to it).
//     A unit's cost is its subtree size plus the ancestors it drags in (its depth - 1). While the heaviest
//     splittable unit costs more than a threshold, replace it by its children's units (the shared prefix is then
//     duplicated into every part that takes one of those children). A subtree that is a plain chain cannot be
//     split (a part with its deepest node needs all of it); a single-child chain at the top of a unit is skipped
//     over to the first branching node. LADE's plan (a level-0 chain with a vertical column hanging off each
//     level-0 node, plus separate verification chains) thus becomes: the verification chains as units, then
//     window columns each with the level-0 prefix it depends on, and the remaining tail of the window.
//  2. Assignment (greedy, heaviest unit first): a unit goes to the part whose load after taking it is smallest,
//     counting only the ancestors that part does not hold yet (so siblings tend to share their prefix).
//     Parts start at `base_load` (e.g. a replica's pending chain, which it must re-feed in the same forward).
//  3. Steps 1-2 run for a few thresholds (the average part size and fractions of it); the partition with the
//     smallest maximum load (then the smallest total) wins. Fully deterministic.
// With k == 1 (or a plan of only the root), every part is the plan itself (global = identity).
#pragma once
#include <cstdint>
#include <vector>

#include "lookahead/decode/step_plan.h"

namespace la {

struct PlanPart {
  StepPlan plan;                // node 0 = the root; ancestor-closed; parent order preserved
  std::vector<int32_t> global;  // global[i] = index in the whole plan of part node i (global[0] == 0)
};

// Splits plans; keeps its scratch between calls, so splitting into a reused `parts` allocates nothing once the
// buffers have grown to the largest plan (rank 0 splits every step).
class Partitioner {
 public:
  // Same as partition_plan(plan, k, base_load), into `parts` (resized to k; their buffers are reused).
  void split(const StepPlan& plan, int k, const std::vector<int>& base_load, std::vector<PlanPart>& parts);
  // Sizes the scratch for plans of up to `nodes` nodes into k parts once (splitting then allocates nothing, whatever
  // plan first reaches that size). The ancestor lists are reserved for trees of depth up to 64 (a deeper one grows
  // them once).
  void reserve(int nodes, int k);

 private:
  struct Loads {  // part loads under reference counting (partition.cpp)
    int n = 0;
    std::vector<int64_t> own, load;
    std::vector<int32_t> anc_begin, anc, cnt;  // ancestors of unit i: anc[anc_begin[i], anc_begin[i+1]); cnt[p*n+x]
    void reset(const StepPlan& plan, const Partitioner& t, int k, const std::vector<int>& base);
    void reserve(size_t nodes, size_t k);
    int64_t gain_in(int i, int p) const;
    int64_t loss_out(int i, int p) const;
    void add(int i, int p);
    void remove(int i, int p);
  };
  void make_tree(const StepPlan& plan);
  int children(int x) const { return child_begin_[x + 1] - child_begin_[x]; }
  int child(int x, int c) const { return child_list_[child_begin_[x] + c]; }
  int64_t unit_cost(int u) const;
  int branch_point(int u) const;
  void make_units(int64_t threshold);
  void assign_lpt(int k);
  bool assign_fill(int k, const std::vector<int>& base);
  bool try_fill(int k, int64_t cap, bool keep);
  void improve(int k);
  void finish(int k, int64_t& max_load, int64_t& total);
  void extract_part(const StepPlan& plan, const uint8_t* member, PlanPart& part);

  int n_ = 0;
  std::vector<int32_t> child_begin_, child_list_, fill_, subtree_, depth_;
  std::vector<int32_t> units_, last_units_, order_, where_, pre_, stack_, local_;
  std::vector<uint8_t> member_, best_member_;  // member[p * n + node]
  Loads L_, trial_;
};

// Splits `plan` into exactly k parts (k >= 1). Parts may hold only the root when the plan has too few nodes.
std::vector<PlanPart> partition_plan(const StepPlan& plan, int k);
// Same, with an initial load per part (base_load.size() == k): tokens that part's replica must compute anyway.
std::vector<PlanPart> partition_plan(const StepPlan& plan, int k, const std::vector<int>& base_load);

// Maps a global accepted path (plan indices, root first) to the part's local indices: the longest prefix whose
// nodes the part holds (parts are ancestor-closed, so this is exactly the accepted nodes the part computed).
// part_global must be strictly increasing (as partition_plan makes it); a binary search per node, no allocation
// beyond `out`.
void local_path(const std::vector<int32_t>& part_global, const std::vector<int32_t>& global_path,
                std::vector<int32_t>& out);
std::vector<int32_t> local_path(const std::vector<int32_t>& part_global, const std::vector<int32_t>& global_path);
inline std::vector<int32_t> local_path(const PlanPart& part, const std::vector<int32_t>& global_path) {
  return local_path(part.global, global_path);
}
// The length of that prefix, without building it.
int local_path_length(const std::vector<int32_t>& part_global, const std::vector<int32_t>& global_path);

// Merges per-part results (results[p][i] is the result of part p's node i) into one result per plan node, in
// `merged` (resized to plan_size; `owner` is scratch, resized too). A node held by several parts must get the same
// result from each (same node, same ancestors, same position): the first node where two parts differ is returned
// in `conflict` (and merging stops, returning false). Throws la::Error if a node is not covered.
struct MergeConflict {
  int node = -1;              // plan node
  int part = -1, other = -1;  // the part whose result differs, and the earlier part that supplied the kept one
  int32_t got = 0, kept = 0;
};
bool merge_part_results(int plan_size, const std::vector<PlanPart>& parts,
                        const std::vector<std::vector<int32_t>>& results, std::vector<int32_t>& merged,
                        std::vector<int32_t>& owner, MergeConflict* conflict);
// Same, allocating; `disagreements`, if given, counts the nodes whose copies differ instead of stopping (tests).
std::vector<int32_t> merge_part_results(int plan_size, const std::vector<PlanPart>& parts,
                                        const std::vector<std::vector<int32_t>>& results,
                                        int* disagreements = nullptr);

// Checks the invariants above (valid parts, root first, ancestor-closed with matching tokens/flags, parents
// mapped consistently, full coverage). Throws la::Error describing the first violation.
void check_partition(const StepPlan& plan, const std::vector<PlanPart>& parts);

// Number of plan nodes of the largest part (root included).
int max_part_size(const std::vector<PlanPart>& parts);

}  // namespace la
