// Plan partitioning for lookahead parallelism; the rule is described in partition.h.
//
// Cost model: a part's load is the number of tokens its replica computes besides the root (its plan size - 1)
// plus its base load. A unit (a subtree under a top node u, with the path root..u) costs subtree(u) + depth(u)-1
// when it lands in a part holding none of its ancestors, less the ancestors that part already holds.
#include "lookahead/parallel/partition.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "lookahead/util/error.h"

namespace la {
namespace {

struct Tree {
  int n = 0;
  std::vector<std::vector<int32_t>> children;
  std::vector<int32_t> subtree;  // node count of the subtree, the node included
  std::vector<int32_t> depth;
};

Tree make_tree(const StepPlan& plan) {
  Tree t;
  t.n = plan.size();
  t.children.assign(t.n, {});
  for (int i = 1; i < t.n; ++i) t.children[plan.parents[i]].push_back(i);
  t.subtree.assign(t.n, 1);
  for (int i = t.n - 1; i >= 1; --i) t.subtree[plan.parents[i]] += t.subtree[i];
  t.depth = plan.depths();
  return t;
}

int64_t unit_cost(const Tree& t, int u) { return t.subtree[u] + t.depth[u] - 1; }

// The first node at or below u with more than one child, or -1 when the subtree of u is a plain chain.
int branch_point(const Tree& t, int u) {
  int v = u;
  while (t.children[v].size() == 1) v = t.children[v][0];
  return t.children[v].empty() ? -1 : v;
}

// Step 1: units for a threshold. Units are disjoint subtrees whose union, with their ancestor paths, is the
// whole plan minus the root.
std::vector<int32_t> make_units(const Tree& t, int64_t threshold) {
  std::vector<int32_t> units(t.children[0].begin(), t.children[0].end());
  for (;;) {
    int best = -1;
    int64_t best_cost = threshold;
    for (size_t i = 0; i < units.size(); ++i) {
      const int64_t c = unit_cost(t, units[i]);
      if (c > best_cost && branch_point(t, units[i]) >= 0) {
        best = static_cast<int>(i);
        best_cost = c;
      }
    }
    if (best < 0) break;
    const int v = branch_point(t, units[best]);
    units.erase(units.begin() + best);
    units.insert(units.end(), t.children[v].begin(), t.children[v].end());
  }
  return units;
}

struct Assignment {
  std::vector<std::vector<uint8_t>> member;  // member[p][node]
  std::vector<int64_t> load;
  int64_t max_load = 0;
  int64_t total = 0;
};

// Part loads under reference counting: a part holds the union of its units' subtrees and ancestor paths.
class Loads {
 public:
  Loads(const StepPlan& plan, const Tree& t, const std::vector<int32_t>& units, int k, const std::vector<int>& base)
      : own_(units.size()), anc_(units.size()), cnt_(k, std::vector<int32_t>(t.n, 0)),
        load_(base.begin(), base.end()) {
    for (size_t i = 0; i < units.size(); ++i) {
      own_[i] = t.subtree[units[i]];
      for (int a = plan.parents[units[i]]; a > 0; a = plan.parents[a]) anc_[i].push_back(a);
    }
  }
  int64_t load(int p) const { return load_[p]; }
  const std::vector<int64_t>& loads() const { return load_; }
  // Load unit i adds to part p / removes from p (which holds it).
  int64_t gain_in(int i, int p) const {
    int64_t g = own_[i];
    for (int a : anc_[i]) g += cnt_[p][a] == 0 ? 1 : 0;
    return g;
  }
  int64_t loss_out(int i, int p) const {
    int64_t g = own_[i];
    for (int a : anc_[i]) g += cnt_[p][a] == 1 ? 1 : 0;
    return g;
  }
  void add(int i, int p) {
    load_[p] += gain_in(i, p);
    for (int a : anc_[i]) ++cnt_[p][a];
  }
  void remove(int i, int p) {
    load_[p] -= loss_out(i, p);
    for (int a : anc_[i]) --cnt_[p][a];
  }
  const std::vector<int32_t>& ancestors(int i) const { return anc_[i]; }

 private:
  std::vector<int64_t> own_;
  std::vector<std::vector<int32_t>> anc_;
  std::vector<std::vector<int32_t>> cnt_;
  std::vector<int64_t> load_;
};

// Construction A (LPT): heaviest unit first, to the part with the smallest load after taking it.
std::vector<int32_t> assign_lpt(const Tree& t, const std::vector<int32_t>& units, int k, Loads& L) {
  const int U = static_cast<int>(units.size());
  std::vector<int32_t> order(U), where(U, -1);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return unit_cost(t, units[a]) > unit_cost(t, units[b]);
  });
  for (int i : order) {
    int best = 0;
    int64_t best_after = std::numeric_limits<int64_t>::max();
    for (int p = 0; p < k; ++p) {
      const int64_t after = L.load(p) + L.gain_in(i, p);
      if (after < best_after || (after == best_after && L.load(p) < L.load(best))) {
        best = p;
        best_after = after;
      }
    }
    L.add(i, best);
    where[i] = best;
  }
  return where;
}

// Construction B (linear fill): units in depth-first order (siblings under a shared prefix are adjacent), cut
// into k consecutive runs with the smallest capacity that fits. Suits long shared prefixes (LADE's window).
// Returns an empty vector when no capacity fits (cannot happen: the largest capacity is the total).
std::vector<int32_t> assign_fill(const StepPlan& plan, const Tree& t, const std::vector<int32_t>& units, int k,
                                 const std::vector<int>& base, Loads& L) {
  const int U = static_cast<int>(units.size());
  // Depth-first (pre-order) rank of every node, children in plan order.
  std::vector<int32_t> pre(t.n, 0), stack{0};
  int next = 0;
  while (!stack.empty()) {
    const int x = stack.back();
    stack.pop_back();
    pre[x] = next++;
    for (auto it = t.children[x].rbegin(); it != t.children[x].rend(); ++it) stack.push_back(*it);
  }
  std::vector<int32_t> order(U);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return pre[units[a]] < pre[units[b]]; });
  auto try_fill = [&](int64_t cap, std::vector<int32_t>* where) {
    Loads l = L;
    int p = 0;
    for (int i : order) {
      while (p < k && l.load(p) + l.gain_in(i, p) > cap) ++p;
      if (p == k) return false;
      l.add(i, p);
      if (where) (*where)[i] = p;
    }
    if (where) L = l;
    return true;
  };
  int64_t lo = 0, hi = *std::max_element(base.begin(), base.end()) + t.n;
  for (int i = 0; i < U; ++i) lo = std::max<int64_t>(lo, unit_cost(t, units[i]));
  if (!try_fill(hi, nullptr)) return {};
  while (lo < hi) {  // fill is not strictly monotone in cap; the result is still a valid assignment
    const int64_t mid = lo + (hi - lo) / 2;
    if (try_fill(mid, nullptr)) hi = mid; else lo = mid + 1;
  }
  std::vector<int32_t> where(U, -1);
  if (!try_fill(hi, &where)) try_fill(*std::max_element(base.begin(), base.end()) + t.n, &where);
  return where;
}

// Local search: move single units off the most loaded part while that lowers its load without creating a new
// maximum. Every move lowers the largest load or the number of parts at it; the cap only bounds the cost.
void improve(int k, std::vector<int32_t>& where, Loads& L) {
  const int U = static_cast<int>(where.size());
  for (int iter = 0; iter < 4 * U + 16; ++iter) {
    const auto& ld = L.loads();
    const int src = static_cast<int>(std::max_element(ld.begin(), ld.end()) - ld.begin());
    int bi = -1, bq = -1;
    int64_t best_peak = L.load(src);
    for (int i = 0; i < U; ++i) {
      if (where[i] != src) continue;
      const int64_t src_after = L.load(src) - L.loss_out(i, src);
      for (int q = 0; q < k; ++q) {
        if (q == src) continue;
        const int64_t peak = std::max(src_after, L.load(q) + L.gain_in(i, q));
        if (peak < best_peak) {
          best_peak = peak;
          bi = i;
          bq = q;
        }
      }
    }
    if (bi < 0) break;
    L.remove(bi, src);
    L.add(bi, bq);
    where[bi] = bq;
  }
}

Assignment finish(const Tree& t, const std::vector<int32_t>& units, int k, const std::vector<int32_t>& where,
                  const Loads& L) {
  Assignment as;
  as.member.assign(k, std::vector<uint8_t>(t.n, 0));
  as.load = L.loads();
  std::vector<int32_t> stack;
  for (int p = 0; p < k; ++p) as.member[p][0] = 1;
  for (size_t i = 0; i < units.size(); ++i) {
    auto& m = as.member[where[i]];
    for (int a : L.ancestors(static_cast<int>(i))) m[a] = 1;
    stack.assign(1, units[i]);
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      m[x] = 1;
      stack.insert(stack.end(), t.children[x].begin(), t.children[x].end());
    }
  }
  for (int p = 0; p < k; ++p) {
    as.max_load = std::max(as.max_load, as.load[p]);
    as.total += as.load[p];
  }
  return as;
}

PlanPart extract_part(const StepPlan& plan, const std::vector<uint8_t>& member) {
  PlanPart part;
  std::vector<int32_t> local(plan.size(), -1);
  for (int i = 0; i < plan.size(); ++i) {
    if (!member[i]) continue;
    const int32_t gp = plan.parents[i];
    local[i] = part.plan.add(plan.tokens[i], gp < 0 ? -1 : local[gp], plan.verify[i] != 0);
    part.global.push_back(i);
  }
  return part;
}

PlanPart whole_plan(const StepPlan& plan) {
  PlanPart part;
  part.plan = plan;
  part.global.resize(plan.size());
  std::iota(part.global.begin(), part.global.end(), 0);
  return part;
}

}  // namespace

std::vector<PlanPart> partition_plan(const StepPlan& plan, int k) {
  return partition_plan(plan, k, std::vector<int>(k > 0 ? k : 0, 0));
}

std::vector<PlanPart> partition_plan(const StepPlan& plan, int k, const std::vector<int>& base_load) {
  LA_CHECK(k >= 1, "partition: k = ", k, " (must be at least 1)");
  LA_CHECK(static_cast<int>(base_load.size()) == k, "partition: ", base_load.size(), " base loads for ", k,
           " parts");
  plan.validate();
  if (k == 1 || plan.size() == 1) return std::vector<PlanPart>(k, whole_plan(plan));

  const Tree t = make_tree(plan);
  const int64_t avg = (plan.size() - 1 + k - 1) / k;
  // Step 3: a few granularities; coarser units duplicate fewer ancestors, finer ones balance better.
  const int64_t thresholds[] = {std::numeric_limits<int64_t>::max(), avg, avg / 2, avg / 4, 0};
  Assignment best;
  bool have = false;
  std::vector<int32_t> last_units;
  for (int64_t th : thresholds) {
    auto units = make_units(t, th);
    if (have && units == last_units) continue;
    for (int method = 0; method < 2; ++method) {
      Loads L(plan, t, units, k, base_load);
      auto where = method == 0 ? assign_lpt(t, units, k, L) : assign_fill(plan, t, units, k, base_load, L);
      if (where.empty()) continue;
      improve(k, where, L);
      auto as = finish(t, units, k, where, L);
      if (!have || as.max_load < best.max_load || (as.max_load == best.max_load && as.total < best.total)) {
        best = std::move(as);
        have = true;
      }
    }
    last_units = std::move(units);
  }
  std::vector<PlanPart> parts;
  parts.reserve(k);
  for (int p = 0; p < k; ++p) parts.push_back(extract_part(plan, best.member[p]));
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
      LA_CHECK(part.plan.tokens[i] == plan.tokens[g] && part.plan.verify[i] == plan.verify[g], "partition: part ",
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
