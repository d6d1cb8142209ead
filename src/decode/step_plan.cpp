#include "lookahead/decode/step_plan.h"

#include "lookahead/util/error.h"

namespace la {

std::vector<int32_t> StepPlan::depths() const {
  std::vector<int32_t> d(tokens.size(), 0);
  for (size_t i = 1; i < tokens.size(); ++i) d[i] = d[parents[i]] + 1;
  return d;
}

int StepPlan::num_draft() const {
  int n = 0;
  for (size_t i = 1; i < verify.size(); ++i) n += verify[i] ? 1 : 0;
  return n;
}

int StepPlan::num_lookahead() const {
  int n = 0;
  for (size_t i = 1; i < verify.size(); ++i) n += verify[i] ? 0 : 1;
  return n;
}

void StepPlan::validate() const {
  LA_CHECK(!tokens.empty(), "step plan: empty (no root)");
  LA_CHECK(parents.size() == tokens.size() && verify.size() == tokens.size(), "step plan: ragged arrays");
  LA_CHECK(parents[0] == -1 && verify[0] == 1, "step plan: node 0 must be the root");
  for (size_t i = 1; i < tokens.size(); ++i) {
    LA_CHECK(parents[i] >= 0 && parents[i] < static_cast<int32_t>(i), "step plan: node ", i, " has parent ",
             parents[i], " (must be an earlier node)");
    if (verify[i]) LA_CHECK(verify[parents[i]], "step plan: draft node ", i, " hangs off a lookahead node");
  }
}

Verdict verify_plan(const StepPlan& plan, const std::vector<int32_t>& results) {
  LA_CHECK(results.size() == plan.tokens.size(), "verify: ", results.size(), " results for ", plan.tokens.size(),
           " plan nodes");
  // children lists of verify nodes, in plan order (the first matching child wins; duplicates are harmless).
  const int n = plan.size();
  std::vector<int32_t> first_child(n, -1), next_sibling(n, -1), last_child(n, -1);
  for (int i = 1; i < n; ++i) {
    if (!plan.verify[i]) continue;
    const int p = plan.parents[i];
    if (last_child[p] < 0) first_child[p] = i; else next_sibling[last_child[p]] = i;
    last_child[p] = i;
  }
  Verdict v;
  int cur = 0;
  v.path.push_back(0);
  for (;;) {
    const int32_t want = results[cur];
    int next = -1;
    for (int c = first_child[cur]; c >= 0; c = next_sibling[c]) {
      if (plan.tokens[c] == want) { next = c; break; }
    }
    if (next < 0) break;
    v.path.push_back(next);
    v.tokens.push_back(plan.tokens[next]);
    cur = next;
  }
  v.tokens.push_back(results[cur]);
  return v;
}

}  // namespace la
