// Plan partitioning for lookahead parallelism; the rule is described in partition.h.
//
// Cost model: a part's load is the number of tokens its replica computes besides the root (its plan size - 1)
// plus its base load. A unit (a subtree under a top node u, with the path root..u) costs subtree(u) + depth(u)-1
// when it lands in a part holding none of its ancestors, less the ancestors that part already holds.
#include "lookahead/parallel/partition.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "lookahead/util/error.h"

namespace la {

// ------------------------------------------------------------------------------------------------ tree

void Partitioner::make_tree(const StepPlan& plan) {
  n_ = plan.size();
  child_begin_.assign(n_ + 1, 0);
  for (int i = 1; i < n_; ++i) ++child_begin_[plan.parents[i] + 1];
  for (int i = 0; i < n_; ++i) child_begin_[i + 1] += child_begin_[i];
  child_list_.resize(n_ > 0 ? n_ - 1 : 0);
  fill_.assign(child_begin_.begin(), child_begin_.end() - 1);
  for (int i = 1; i < n_; ++i) child_list_[fill_[plan.parents[i]]++] = i;  // children in plan order
  subtree_.assign(n_, 1);
  for (int i = n_ - 1; i >= 1; --i) subtree_[plan.parents[i]] += subtree_[i];
  depth_.assign(n_, 0);
  for (int i = 1; i < n_; ++i) depth_[i] = depth_[plan.parents[i]] + 1;
}

int64_t Partitioner::unit_cost(int u) const { return subtree_[u] + depth_[u] - 1; }

// The first node at or below u with more than one child, or -1 when the subtree of u is a plain chain.
int Partitioner::branch_point(int u) const {
  int v = u;
  while (children(v) == 1) v = child(v, 0);
  return children(v) == 0 ? -1 : v;
}

// Step 1: units for a threshold. Units are disjoint subtrees whose union, with their ancestor paths, is the
// whole plan minus the root.
void Partitioner::make_units(int64_t threshold) {
  units_.assign(child_list_.begin() + child_begin_[0], child_list_.begin() + child_begin_[1]);
  for (;;) {
    int best = -1;
    int64_t best_cost = threshold;
    for (size_t i = 0; i < units_.size(); ++i) {
      const int64_t c = unit_cost(units_[i]);
      if (c > best_cost && branch_point(units_[i]) >= 0) {
        best = static_cast<int>(i);
        best_cost = c;
      }
    }
    if (best < 0) break;
    const int v = branch_point(units_[best]);
    units_.erase(units_.begin() + best);
    units_.insert(units_.end(), child_list_.begin() + child_begin_[v], child_list_.begin() + child_begin_[v + 1]);
  }
}

// ------------------------------------------------------------------------------------------------ loads

// Part loads under reference counting: a part holds the union of its units' subtrees and ancestor paths.
void Partitioner::Loads::reset(const StepPlan& plan, const Partitioner& t, int k, const std::vector<int>& base) {
  const auto& units = t.units_;
  const size_t U = units.size();
  n = t.n_;
  own.resize(U);
  anc_begin.assign(U + 1, 0);
  anc.clear();
  for (size_t i = 0; i < U; ++i) {
    own[i] = t.subtree_[units[i]];
    for (int a = plan.parents[units[i]]; a > 0; a = plan.parents[a]) anc.push_back(a);
    anc_begin[i + 1] = static_cast<int32_t>(anc.size());
  }
  cnt.assign(static_cast<size_t>(k) * n, 0);
  load.assign(base.begin(), base.end());
}

int64_t Partitioner::Loads::gain_in(int i, int p) const {
  int64_t g = own[i];
  const int32_t* c = cnt.data() + static_cast<size_t>(p) * n;
  for (int j = anc_begin[i]; j < anc_begin[i + 1]; ++j) g += c[anc[j]] == 0 ? 1 : 0;
  return g;
}

int64_t Partitioner::Loads::loss_out(int i, int p) const {
  int64_t g = own[i];
  const int32_t* c = cnt.data() + static_cast<size_t>(p) * n;
  for (int j = anc_begin[i]; j < anc_begin[i + 1]; ++j) g += c[anc[j]] == 1 ? 1 : 0;
  return g;
}

void Partitioner::Loads::add(int i, int p) {
  load[p] += gain_in(i, p);
  int32_t* c = cnt.data() + static_cast<size_t>(p) * n;
  for (int j = anc_begin[i]; j < anc_begin[i + 1]; ++j) ++c[anc[j]];
}

void Partitioner::Loads::remove(int i, int p) {
  load[p] -= loss_out(i, p);
  int32_t* c = cnt.data() + static_cast<size_t>(p) * n;
  for (int j = anc_begin[i]; j < anc_begin[i + 1]; ++j) --c[anc[j]];
}

// ------------------------------------------------------------------------------------------------ assignment

// Construction A (LPT): heaviest unit first, to the part with the smallest load after taking it.
void Partitioner::assign_lpt(int k) {
  const int U = static_cast<int>(units_.size());
  order_.resize(U);
  where_.assign(U, -1);
  std::iota(order_.begin(), order_.end(), 0);
  // Heaviest first, ties in unit order (what a stable sort gives, without its temporary buffer).
  std::sort(order_.begin(), order_.end(), [&](int a, int b) {
    const int64_t ca = unit_cost(units_[a]), cb = unit_cost(units_[b]);
    return ca != cb ? ca > cb : a < b;
  });
  for (int i : order_) {
    int best = 0;
    int64_t best_after = std::numeric_limits<int64_t>::max();
    for (int p = 0; p < k; ++p) {
      const int64_t after = L_.load[p] + L_.gain_in(i, p);
      if (after < best_after || (after == best_after && L_.load[p] < L_.load[best])) {
        best = p;
        best_after = after;
      }
    }
    L_.add(i, best);
    where_[i] = best;
  }
}

// Construction B (linear fill): units in depth-first order (siblings under a shared prefix are adjacent), cut
// into k consecutive runs with the smallest capacity that fits. Suits long shared prefixes (LADE's window).
// Returns false when no capacity fits (cannot happen: the largest capacity is the total).
bool Partitioner::try_fill(int k, int64_t cap, bool keep) {
  trial_ = L_;  // copy into kept storage
  int p = 0;
  for (int i : order_) {
    while (p < k && trial_.load[p] + trial_.gain_in(i, p) > cap) ++p;
    if (p == k) return false;
    trial_.add(i, p);
    if (keep) where_[i] = p;
  }
  if (keep) std::swap(L_, trial_);
  return true;
}

bool Partitioner::assign_fill(int k, const std::vector<int>& base) {
  const int U = static_cast<int>(units_.size());
  // Depth-first (pre-order) rank of every node, children in plan order.
  pre_.assign(n_, 0);
  stack_.assign(1, 0);
  int next = 0;
  while (!stack_.empty()) {
    const int x = stack_.back();
    stack_.pop_back();
    pre_[x] = next++;
    for (int c = children(x) - 1; c >= 0; --c) stack_.push_back(child(x, c));
  }
  order_.resize(U);
  std::iota(order_.begin(), order_.end(), 0);
  std::sort(order_.begin(), order_.end(), [&](int a, int b) { return pre_[units_[a]] < pre_[units_[b]]; });
  const int64_t top = *std::max_element(base.begin(), base.end()) + n_;
  int64_t lo = 0, hi = top;
  for (int i = 0; i < U; ++i) lo = std::max<int64_t>(lo, unit_cost(units_[i]));
  if (!try_fill(k, hi, false)) return false;
  while (lo < hi) {  // fill is not strictly monotone in cap; the result is still a valid assignment
    const int64_t mid = lo + (hi - lo) / 2;
    if (try_fill(k, mid, false)) hi = mid; else lo = mid + 1;
  }
  where_.assign(U, -1);
  if (!try_fill(k, hi, true)) try_fill(k, top, true);
  return true;
}

// Local search: move single units off the most loaded part while that lowers its load without creating a new
// maximum. Every move lowers the largest load or the number of parts at it; the cap only bounds the cost.
void Partitioner::improve(int k) {
  const int U = static_cast<int>(where_.size());
  for (int iter = 0; iter < 4 * U + 16; ++iter) {
    const auto& ld = L_.load;
    const int src = static_cast<int>(std::max_element(ld.begin(), ld.end()) - ld.begin());
    int bi = -1, bq = -1;
    int64_t best_peak = L_.load[src];
    for (int i = 0; i < U; ++i) {
      if (where_[i] != src) continue;
      const int64_t src_after = L_.load[src] - L_.loss_out(i, src);
      for (int q = 0; q < k; ++q) {
        if (q == src) continue;
        const int64_t peak = std::max(src_after, L_.load[q] + L_.gain_in(i, q));
        if (peak < best_peak) {
          best_peak = peak;
          bi = i;
          bq = q;
        }
      }
    }
    if (bi < 0) break;
    L_.remove(bi, src);
    L_.add(bi, bq);
    where_[bi] = bq;
  }
}

// The members of every part (member_[p * n + node]) and the partition's maximum and total load.
void Partitioner::finish(int k, int64_t& max_load, int64_t& total) {
  member_.assign(static_cast<size_t>(k) * n_, 0);
  for (int p = 0; p < k; ++p) member_[static_cast<size_t>(p) * n_] = 1;
  for (size_t i = 0; i < units_.size(); ++i) {
    uint8_t* m = member_.data() + static_cast<size_t>(where_[i]) * n_;
    for (int j = L_.anc_begin[i]; j < L_.anc_begin[i + 1]; ++j) m[L_.anc[j]] = 1;
    stack_.assign(1, units_[i]);
    while (!stack_.empty()) {
      const int x = stack_.back();
      stack_.pop_back();
      m[x] = 1;
      for (int c = 0; c < children(x); ++c) stack_.push_back(child(x, c));
    }
  }
  max_load = 0;
  total = 0;
  for (int p = 0; p < k; ++p) {
    max_load = std::max(max_load, L_.load[p]);
    total += L_.load[p];
  }
}

void Partitioner::extract_part(const StepPlan& plan, const uint8_t* member, PlanPart& part) {
  part.plan.clear();
  part.global.clear();
  local_.assign(plan.size(), -1);
  for (int i = 0; i < plan.size(); ++i) {
    if (!member[i]) continue;
    const int32_t gp = plan.parents[i];
    local_[i] = part.plan.add(plan.tokens[i], gp < 0 ? -1 : local_[gp], plan.draft[i] != 0);
    part.global.push_back(i);
  }
}

void Partitioner::Loads::reserve(size_t nodes, size_t k) {
  own.reserve(nodes);
  load.reserve(k);
  anc_begin.reserve(nodes + 1);
  anc.reserve(nodes * std::min<size_t>(nodes, 64));
  cnt.reserve(k * nodes);
}

void Partitioner::reserve(int nodes, int k) {
  const size_t n = static_cast<size_t>(std::max(nodes, 1)), kk = static_cast<size_t>(std::max(k, 1));
  for (auto* v : {&child_begin_, &child_list_, &fill_, &subtree_, &depth_, &units_, &last_units_, &order_, &where_,
                  &pre_, &stack_, &local_})
    v->reserve(n + 1);
  member_.reserve(kk * n);
  best_member_.reserve(kk * n);
  L_.reserve(n, kk);
  trial_.reserve(n, kk);
}

void Partitioner::split(const StepPlan& plan, int k, const std::vector<int>& base_load, std::vector<PlanPart>& parts) {
  LA_CHECK(k >= 1, "partition: k = ", k, " (must be at least 1)");
  LA_CHECK(static_cast<int>(base_load.size()) == k, "partition: ", base_load.size(), " base loads for ", k,
           " parts");
  plan.validate();
  parts.resize(k);
  if (k == 1 || plan.size() == 1) {  // every part is the whole plan
    for (auto& part : parts) {
      part.plan = plan;
      part.global.resize(plan.size());
      std::iota(part.global.begin(), part.global.end(), 0);
    }
    return;
  }

  make_tree(plan);
  const int64_t avg = (plan.size() - 1 + k - 1) / k;
  // Step 3: a few granularities; coarser units duplicate fewer ancestors, finer ones balance better.
  const int64_t thresholds[] = {std::numeric_limits<int64_t>::max(), avg, avg / 2, avg / 4, 0};
  int64_t best_max = 0, best_total = 0;
  bool have = false;
  last_units_.clear();
  for (int64_t th : thresholds) {
    make_units(th);
    if (have && units_ == last_units_) continue;
    for (int method = 0; method < 2; ++method) {
      L_.reset(plan, *this, k, base_load);
      if (method == 0) assign_lpt(k);
      else if (!assign_fill(k, base_load)) continue;
      improve(k);
      int64_t mx, total;
      finish(k, mx, total);
      if (!have || mx < best_max || (mx == best_max && total < best_total)) {
        best_member_.swap(member_);
        best_max = mx;
        best_total = total;
        have = true;
      }
    }
    last_units_.swap(units_);
  }
  for (int p = 0; p < k; ++p) extract_part(plan, best_member_.data() + static_cast<size_t>(p) * n_, parts[p]);
}

std::vector<PlanPart> partition_plan(const StepPlan& plan, int k) {
  return partition_plan(plan, k, std::vector<int>(k > 0 ? k : 0, 0));
}

std::vector<PlanPart> partition_plan(const StepPlan& plan, int k, const std::vector<int>& base_load) {
  Partitioner pt;
  std::vector<PlanPart> parts;
  pt.split(plan, k, base_load, parts);
  return parts;
}

void local_path(const std::vector<int32_t>& part_global, const std::vector<int32_t>& global_path,
                std::vector<int32_t>& out) {
  out.clear();
  for (int32_t g : global_path) {
    const auto it = std::lower_bound(part_global.begin(), part_global.end(), g);
    if (it == part_global.end() || *it != g) break;
    out.push_back(static_cast<int32_t>(it - part_global.begin()));
  }
}

std::vector<int32_t> local_path(const std::vector<int32_t>& part_global, const std::vector<int32_t>& global_path) {
  std::vector<int32_t> out;
  local_path(part_global, global_path, out);
  return out;
}

int local_path_length(const std::vector<int32_t>& part_global, const std::vector<int32_t>& global_path) {
  int n = 0;
  for (int32_t g : global_path) {
    if (!std::binary_search(part_global.begin(), part_global.end(), g)) break;
    ++n;
  }
  return n;
}

namespace {
// Shared by both merges: `on_conflict` returns whether to go on.
template <class OnConflict>
void merge_into(int plan_size, const std::vector<PlanPart>& parts, const std::vector<std::vector<int32_t>>& results,
                std::vector<int32_t>& merged, std::vector<int32_t>& owner, OnConflict on_conflict) {
  LA_CHECK(parts.size() == results.size(), "merge: ", results.size(), " result sets for ", parts.size(), " parts");
  merged.assign(plan_size, 0);
  owner.assign(plan_size, -1);
  for (size_t p = 0; p < parts.size(); ++p) {
    const auto& g = parts[p].global;
    LA_CHECK(results[p].size() == g.size(), "merge: part ", p, " returned ", results[p].size(), " results for ",
             g.size(), " nodes");
    for (size_t i = 0; i < g.size(); ++i) {
      const int32_t x = g[i];
      LA_CHECK(x >= 0 && x < plan_size, "merge: part ", p, " maps node ", i, " to ", x, " (plan has ", plan_size,
               " nodes)");
      if (owner[x] < 0) {
        merged[x] = results[p][i];
        owner[x] = static_cast<int32_t>(p);
      } else if (merged[x] != results[p][i]) {
        if (!on_conflict(MergeConflict{x, static_cast<int>(p), owner[x], results[p][i], merged[x]})) return;
      }
    }
  }
  for (int i = 0; i < plan_size; ++i) LA_CHECK(owner[i] >= 0, "merge: plan node ", i, " is in no part");
}
}  // namespace

bool merge_part_results(int plan_size, const std::vector<PlanPart>& parts,
                        const std::vector<std::vector<int32_t>>& results, std::vector<int32_t>& merged,
                        std::vector<int32_t>& owner, MergeConflict* conflict) {
  bool ok = true;
  merge_into(plan_size, parts, results, merged, owner, [&](const MergeConflict& c) {
    ok = false;
    if (conflict) *conflict = c;
    return false;
  });
  return ok;
}

std::vector<int32_t> merge_part_results(int plan_size, const std::vector<PlanPart>& parts,
                                        const std::vector<std::vector<int32_t>>& results, int* disagreements) {
  std::vector<int32_t> merged, owner;
  int diff = 0;
  merge_into(plan_size, parts, results, merged, owner, [&](const MergeConflict&) {
    ++diff;
    return true;
  });
  if (disagreements) *disagreements = diff;
  return merged;
}

void check_partition(const StepPlan& plan, const std::vector<PlanPart>& parts) {
  const int n = plan.size();
  std::vector<uint8_t> covered(n, 0);
  for (size_t p = 0; p < parts.size(); ++p) {
    const auto& part = parts[p];
    part.plan.validate();
    const int m = part.plan.size();
    LA_CHECK(static_cast<int>(part.global.size()) == m, "partition: part ", p, " has ", part.global.size(),
             " global ids for ", m, " nodes");
    LA_CHECK(part.global[0] == 0, "partition: part ", p, " does not start with the root");
    for (int i = 0; i < m; ++i) {
      const int32_t g = part.global[i];
      LA_CHECK(g >= 0 && g < n, "partition: part ", p, " node ", i, " maps to ", g);
      LA_CHECK(i == 0 || g > part.global[i - 1], "partition: part ", p, " global ids not increasing at ", i);
      LA_CHECK(part.plan.tokens[i] == plan.tokens[g] && part.plan.draft[i] == plan.draft[g], "partition: part ",
               p, " node ", i, " differs from plan node ", g);
      if (i > 0) {
        const int32_t lp = part.plan.parents[i];
        LA_CHECK(part.global[lp] == plan.parents[g], "partition: part ", p, " node ", i, " (plan ", g,
                 ") has the wrong parent / misses an ancestor");
      }
      covered[g] = 1;
    }
  }
  for (int i = 0; i < n; ++i) LA_CHECK(covered[i], "partition: plan node ", i, " is in no part");
}

int max_part_size(const std::vector<PlanPart>& parts) {
  int m = 0;
  for (const auto& p : parts) m = std::max(m, p.plan.size());
  return m;
}

}  // namespace la
