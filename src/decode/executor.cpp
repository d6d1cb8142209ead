#include "lookahead/decode/executor.h"

#include <algorithm>
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

const StepInput& LocalExecutor::stage(const std::vector<int32_t>& seq, const StepPlan& plan) {
  const int L = model_.cache_len();
  const int S = static_cast<int>(seq.size());
  LA_CHECK(L < S, "executor: cache (", L, ") is not behind the sequence (", S, ")");
  LA_CHECK(!plan.tokens.empty() && plan.tokens[0] == seq.back(), "executor: plan root is not the last token");
  const int P = S - L;  // pending chain, root included
  const int n = plan.size();
  // in_ keeps its capacity across steps (clear() does not free): no allocation once it held the largest step.
  in_.tokens.clear();
  in_.positions.clear();
  in_.parents.clear();
  for (int i = 0; i < P; ++i) {
    in_.tokens.push_back(seq[L + i]);
    in_.positions.push_back(L + i);
    in_.parents.push_back(i - 1);
  }
  // Plan node i sits at step index P-1+i (the root is the pending chain's last token); its position is its
  // parent's plus one (parents come first), i.e. the root's position plus its depth.
  for (int i = 1; i < n; ++i) {
    const int p = P - 1 + plan.parents[i];
    in_.tokens.push_back(plan.tokens[i]);
    in_.positions.push_back(in_.positions[p] + 1);
    in_.parents.push_back(p);
  }
  in_.first_output = P - 1;  // collect() reads the root's result and the plan's, not the pending chain's
  pending_ = P;
  plan_nodes_ = n;
  last_tokens_ = static_cast<int>(in_.tokens.size());
  return in_;
}

void LocalExecutor::reserve_step(int rows) {
  const size_t n = static_cast<size_t>(std::max(rows, 1));
  in_.tokens.reserve(n);
  in_.positions.reserve(n);
  in_.parents.reserve(n);
  out_.reserve(n);
  idx_.reserve(n);
}

void LocalExecutor::collect(const std::vector<int32_t>& out, std::vector<int32_t>& results) const {
  results.resize(plan_nodes_);
  for (int i = 0; i < plan_nodes_; ++i) results[i] = out[pending_ - 1 + i];
}

void LocalExecutor::run(const std::vector<int32_t>& seq, const StepPlan& plan, std::vector<int32_t>& results) {
  stage(seq, plan);
  // forward_batch with this one item writes into out_ (capacity kept): forward() would return a new vector per step.
  const BatchItem it{&model_, &in_, &sp_, &out_, nullptr};
  model_.forward_batch(&it, 1);
  collect(out_, results);
}

void LocalExecutor::begin_deferred(const std::vector<int32_t>& prompt, const SampleParams& sp) {
  LA_CHECK(!prompt.empty(), "empty prompt (no tokens, not even BOS)");
  sp_ = sp;
  model_.truncate(0);
  pending_ = 0;
  plan_nodes_ = 0;
}

int LocalExecutor::prefill_left(const std::vector<int32_t>& seq) const {
  return std::max(0, static_cast<int>(seq.size()) - 1 - model_.cache_len());
}

const StepInput& LocalExecutor::stage_prefill(const std::vector<int32_t>& seq, int max_tokens) {
  const int L = model_.cache_len();
  const int c = std::min(max_tokens, prefill_left(seq));
  LA_CHECK(c > 0, "executor: no prompt tokens left to prefill");
  in_.tokens.assign(seq.begin() + L, seq.begin() + L + c);
  in_.positions.clear();
  in_.parents.clear();
  for (int i = 0; i < c; ++i) {
    in_.positions.push_back(L + i);
    in_.parents.push_back(i - 1);
  }
  in_.first_output = c;  // a prompt chunk chooses no next token
  pending_ = 0;
  plan_nodes_ = 0;
  last_tokens_ = c;
  return in_;
}

void LocalExecutor::commit_prefill() {
  idx_.clear();
  for (int i = 0; i < last_tokens_; ++i) idx_.push_back(i);
  model_.commit(idx_);
}

void LocalExecutor::commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) {
  // Commit the pending chain and the accepted plan nodes this replica computed, leaving seq.back() pending.
  const int L = model_.cache_len();
  const int target = static_cast<int>(seq.size()) - 1;  // cache should hold seq[0, target)
  idx_.clear();
  for (int i = 0; i < pending_ && L + i < target; ++i) idx_.push_back(i);
  int have = L + static_cast<int>(idx_.size());
  for (size_t k = 1; k < path.size() && have < target; ++k) {
    const int node = path[k];
    if (node < 0 || node >= plan_nodes_) break;  // not computed here: the rest is re-fed next step
    idx_.push_back(pending_ - 1 + node);
    ++have;
  }
  model_.commit(idx_);
  pending_ = 0;
  plan_nodes_ = 0;
}

// Rows before first_output choose no token (no LM head); the rows attend their positions (cost_model.h, "Context").
void LocalExecutor::observe_cost(StepCostModel& cost, double run_seconds) const {
  double positions = 0;
  for (const int32_t p : in_.positions) positions += p;
  const double context = in_.positions.empty() ? -1.0 : positions / static_cast<double>(in_.positions.size());
  cost.observe_forward(last_tokens_, run_seconds, in_.first_output, context);
}

}  // namespace la
