// Acceptance model of one strategy: how many draft tokens a plan with a draft budget of b draft nodes is expected
// to have accepted, and how many draft nodes it actually holds. No libtorch.
//
// Design (why this shape):
// * Budgets form a ladder b_0 = 0 < b_1 < ... < b_m (the strategy's fixed parameters give b_m). A strategy plans
//   at budget b by keeping the first b draft nodes of the plan it would make at any larger budget (LADE: the
//   first G' candidates; trie: the first nodes of its best-first, frequency-ranked selection; prompt lookup,
//   Jacobi: a shorter chain; Ouroboros: a shorter draft chain, then extensions). So ONE verified step at budget B
//   tells, exactly and for free, what every smaller budget would have yielded: the verifier's path p_1, p_2, ...
//   runs through nodes of increasing verify rank, and a budget b keeps its first k nodes where rank(p_k) <= b
//   (the verifier takes the first matching child, and a prefix of the plan keeps or drops that child entirely).
//   Every step therefore updates every ladder level up to the budget planned (counterfactual statistics); levels
//   above it are only learned by planning them (the controller's probes).
// * Per level: exponentially decayed sums of accepted tokens and of draft nodes held. Every level ages by 1/64 per
//   step, observed or not: about the last 64 steps count, so a strategy whose drafts stop or start paying is
//   followed, and the stale statistics of a level not planned for a while weigh little against a fresh probe.
//   A level never observed borrows the nearest observed level below (acceptance never decreases with the
//   budget, and assuming no gain above is the cautious choice; probes correct it); with nothing observed, 0.
#pragma once
#include <cstdint>
#include <vector>

namespace la {

class AcceptanceModel {
 public:
  explicit AcceptanceModel(std::vector<int> ladder = {0}, double decay = 1.0 / 64);
  const std::vector<int>& ladder() const { return ladder_; }
  int levels() const { return static_cast<int>(ladder_.size()); }
  // One step planned at ladder level `planned`: accepted[l] and nodes[l] for l = 0..planned are what budget
  // ladder[l] accepted / held (see accepted_by_budget).
  void observe(int planned, const std::vector<int>& accepted, const std::vector<int>& nodes);
  // Expected accepted draft tokens / draft nodes held at a level.
  double expected_accepted(int level) const;
  double expected_nodes(int level) const;
  // Decayed observation weight of a level (0: never observed), and its decayed sum of accepted tokens / nodes.
  double weight(int level) const { return n_[level]; }
  double sum_accepted(int level) const { return acc_[level]; }
  double sum_nodes(int level) const { return nodes_[level]; }

 private:
  int observed_below(int level) const;  // highest observed level <= level, or -1
  std::vector<int> ladder_;
  double decay_;
  std::vector<double> n_, acc_, nodes_;
};

// Counterfactual yield of one verified step for every budget: `ranks_of_path` are the verify ranks (1-based
// position among the plan's draft nodes in index order, root excluded) of the accepted path's nodes after the
// root, in path order (increasing). accepted for budget b = number of leading path nodes with rank <= b.
// `total_draft` = draft nodes in the plan (root excluded); nodes for budget b = min(b, total_draft).
void accepted_by_budget(const std::vector<int>& ladder, int planned, const std::vector<int>& ranks_of_path,
                        int total_draft, std::vector<int>& accepted, std::vector<int>& nodes);

}  // namespace la
