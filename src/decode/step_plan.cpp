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
  for (size_t i = 1; i < draft.size(); ++i) n += draft[i] ? 1 : 0;
  return n;
}

int StepPlan::num_lookahead() const {
  int n = 0;
  for (size_t i = 1; i < draft.size(); ++i) n += draft[i] ? 0 : 1;
  return n;
}

void StepPlan::validate() const {
  LA_CHECK(!tokens.empty(), "step plan: empty (no root)");
  LA_CHECK(parents.size() == tokens.size() && draft.size() == tokens.size(), "step plan: ragged arrays");
  LA_CHECK(parents[0] == -1 && draft[0] == 1, "step plan: node 0 must be the root");
  for (size_t i = 1; i < tokens.size(); ++i) {
    LA_CHECK(parents[i] >= 0 && parents[i] < static_cast<int32_t>(i), "step plan: node ", i, " has parent ",
             parents[i], " (must be an earlier node)");
    if (draft[i]) LA_CHECK(draft[parents[i]], "step plan: draft node ", i, " hangs off a lookahead node");
  }
}

Verdict verify_plan(const StepPlan& plan, const std::vector<int32_t>& results) {
  Verdict v;
  verify_plan(plan, results, v);
  return v;
}

void verify_plan(const StepPlan& plan, const std::vector<int32_t>& results, Verdict& v) {
  LA_CHECK(results.size() == plan.tokens.size(), "verify: ", results.size(), " results for ", plan.tokens.size(),
           " plan nodes");
  // A child always comes after its parent, so the children of `cur` are found by scanning forward from it in
  // plan order: O(nodes x accepted) without any index to build.
  const int n = plan.size();
  v.path.clear();
  v.tokens.clear();
  int cur = 0;
  v.path.push_back(0);
  for (;;) {
    const int32_t want = results[cur];
    int next = -1;
    for (int c = cur + 1; c < n; ++c) {
      if (plan.parents[c] == cur && plan.draft[c] && plan.tokens[c] == want) { next = c; break; }
    }
    if (next < 0) break;
    v.path.push_back(next);
    v.tokens.push_back(plan.tokens[next]);
    cur = next;
  }
  v.tokens.push_back(results[cur]);
}

}  // namespace la
