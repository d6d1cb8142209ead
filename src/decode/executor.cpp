#include "lookahead/decode/executor.h"

#include <chrono>

#include "lookahead/util/error.h"

namespace la {

void LocalExecutor::begin(const std::vector<int32_t>& prompt, const SampleParams& sp) {
  LA_CHECK(!prompt.empty(), "empty prompt (no tokens, not even BOS)");
  sp_ = sp;
  model_.truncate(0);
  // Prefill all but the last prompt token: the last one is the first step's root.
  append_chain(model_, std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
  pending_ = 0;
  plan_nodes_ = 0;
}

std::vector<int32_t> LocalExecutor::run(const std::vector<int32_t>& seq, const StepPlan& plan) {
  const int L = model_.cache_len();
  const int S = static_cast<int>(seq.size());
  LA_CHECK(L < S, "executor: cache (", L, ") is not behind the sequence (", S, ")");
  LA_CHECK(!plan.tokens.empty() && plan.tokens[0] == seq.back(), "executor: plan root is not the last token");
  const int P = S - L;  // pending chain, root included
  const int n = plan.size();
  StepInput in;
  in.tokens.reserve(P + n - 1);
  for (int i = 0; i < P; ++i) {
    in.tokens.push_back(seq[L + i]);
    in.positions.push_back(L + i);
    in.parents.push_back(i - 1);
  }
  const auto depth = plan.depths();
  const int root_pos = S - 1;
  for (int i = 1; i < n; ++i) {
    in.tokens.push_back(plan.tokens[i]);
    in.positions.push_back(root_pos + depth[i]);
    const int p = plan.parents[i];
    in.parents.push_back(p == 0 ? P - 1 : P - 1 + p);
  }
  const double t0 = cost_ ? cost_->now() : 0.0;
  auto out = model_.forward(in, sp_);
  if (cost_) cost_->observe_forward(static_cast<int>(in.tokens.size()), cost_->now() - t0);
  pending_ = P;
  plan_nodes_ = n;
  last_tokens_ = static_cast<int>(in.tokens.size());
  std::vector<int32_t> res(n);
  res[0] = out[P - 1];
  for (int i = 1; i < n; ++i) res[i] = out[P - 1 + i];
  return res;
}

void LocalExecutor::commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) {
  // Commit the pending chain and the accepted plan nodes this replica computed, leaving seq.back() pending.
  const int L = model_.cache_len();
  const int target = static_cast<int>(seq.size()) - 1;  // cache should hold seq[0, target)
  std::vector<int32_t> idx;
  for (int i = 0; i < pending_ && L + i < target; ++i) idx.push_back(i);
  int have = L + static_cast<int>(idx.size());
  for (size_t k = 1; k < path.size() && have < target; ++k) {
    const int node = path[k];
    if (node < 0 || node >= plan_nodes_) break;  // not computed here: the rest is re-fed next step
    idx.push_back(pending_ - 1 + node);
    ++have;
  }
  model_.commit(idx);
  pending_ = 0;
  plan_nodes_ = 0;
}

}  // namespace la
