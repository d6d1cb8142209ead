// Per-strategy acceptance statistics by draft budget (see acceptance_model.h).
#include "lookahead/decode/acceptance_model.h"

#include <algorithm>

#include "lookahead/util/error.h"

namespace la {

AcceptanceModel::AcceptanceModel(std::vector<int> ladder, double decay) : ladder_(std::move(ladder)), decay_(decay) {
  LA_CHECK(!ladder_.empty() && ladder_[0] == 0, "acceptance model: the ladder must start at budget 0");
  for (size_t i = 1; i < ladder_.size(); ++i)
    LA_CHECK(ladder_[i] > ladder_[i - 1], "acceptance model: ladder budgets must increase");
  LA_CHECK(decay_ >= 0 && decay_ < 1, "acceptance model: decay must be in [0, 1)");
  n_.assign(ladder_.size(), 0.0);
  acc_.assign(ladder_.size(), 0.0);
  nodes_.assign(ladder_.size(), 0.0);
}

void AcceptanceModel::observe(int planned, const std::vector<int>& accepted, const std::vector<int>& nodes) {
  LA_CHECK(planned >= 0 && planned < levels() && static_cast<int>(accepted.size()) > planned &&
               static_cast<int>(nodes.size()) > planned,
           "acceptance model: bad observation");
  for (int l = 0; l < levels(); ++l) {  // every level ages, observed or not
    n_[l] *= 1 - decay_;
    acc_[l] *= 1 - decay_;
    nodes_[l] *= 1 - decay_;
  }
  for (int l = 0; l <= planned; ++l) {
    n_[l] += 1;
    acc_[l] += accepted[l];
    nodes_[l] += nodes[l];
  }
}

int AcceptanceModel::observed_below(int level) const {
  for (int l = std::min(level, levels() - 1); l >= 0; --l)
    if (n_[l] > 0) return l;
  return -1;
}

double AcceptanceModel::expected_accepted(int level) const {
  const int l = observed_below(level);
  return l < 0 ? 0.0 : acc_[l] / n_[l];
}

double AcceptanceModel::expected_nodes(int level) const {
  if (n_[level] > 0) return nodes_[level] / n_[level];
  return ladder_[level];  // never planned: assume the budget fills (the cautious cost)
}

void accepted_by_budget(const std::vector<int>& ladder, int planned, const std::vector<int>& ranks_of_path,
                        int total_draft, std::vector<int>& accepted, std::vector<int>& nodes) {
  accepted.assign(planned + 1, 0);
  nodes.assign(planned + 1, 0);
  for (int l = 0; l <= planned; ++l) {
    const int b = ladder[l];
    int k = 0;
    while (k < static_cast<int>(ranks_of_path.size()) && ranks_of_path[k] <= b) ++k;
    accepted[l] = k;
    nodes[l] = std::min(b, total_draft);
  }
}

}  // namespace la
