// The draft-size controller (see draft_controller.h for the rule and why).
#include "lookahead/decode/draft_controller.h"

#include <algorithm>

#include "lookahead/util/error.h"

namespace la {

std::vector<int> Strategy::geometric_ladder(int max_budget, int unit) {
  std::vector<int> v{0};
  if (max_budget <= 0) return v;
  unit = std::max(1, unit);
  for (int p = 1; p < max_budget; p *= 2)
    for (int c : {p, p + p / 2}) {
      const int b = std::max(unit, c / unit * unit);
      if (b < max_budget && b > v.back()) v.push_back(b);
    }
  v.push_back(max_budget);
  return v;
}

void AdaptiveCounters::add(const AdaptiveCounters& o) {
  for (auto& [b, n] : o.budget_hist) budget_hist[b] += n;
  steps += o.steps;
  plain_steps += o.plain_steps;
  probe_steps += o.probe_steps;
  warmup_steps += o.warmup_steps;
}

DraftController::DraftController(Strategy& strategy, const StepCostModel& cost, AdaptiveOptions opt)
    : s_(strategy), cost_(cost), opt_(opt), model_(strategy.draft_ladder(), opt.decay) {
  LA_CHECK(model_.ladder().back() == std::max(0, strategy.max_draft_budget()),
           "draft controller: the ladder of ", strategy.name(), " does not end at its largest budget");
  LA_CHECK(opt_.probe_every >= 1 && opt_.warmup_steps >= 0 && opt_.probe_share > 0 && opt_.warmup_cost >= 1,
           "draft controller: bad options");
  ctx_.assign(std::max(1, strategy.draft_contexts()), model_);
  since_probe_.assign(ctx_.size(), 0);
  ctx_steps_.assign(ctx_.size() * model_.levels(), 0);
  host_s_.assign(model_.levels(), 0.0);
  host_seen_.assign(model_.levels(), 0);
}

double DraftController::host(int level) const {
  if (!opt_.host_overhead) return 0.0;
  for (int l = level; l >= 0; --l)
    if (host_seen_[l]) return host_s_[l];
  return 0.0;
}

double DraftController::step_cost(int level, double nodes) const {
  const int b = model_.ladder()[level];
  return cost_.step_seconds(1 + nodes + s_.lookahead_nodes(b)) + host(level);
}

// A context class seen before uses its own statistics (levels it never planned borrow its nearest planned level
// below, like any AcceptanceModel); a class never seen uses the strategy-wide ones.
const AcceptanceModel& DraftController::current() const {
  const auto& c = ctx_[context_];
  return c.weight(0) > 0 ? c : model_;
}

double DraftController::expected_accepted(int level) const { return current().expected_accepted(level); }

double DraftController::expected_nodes(int level) const { return current().expected_nodes(level); }

double DraftController::score(int level) const {
  return (1 + expected_accepted(level)) / step_cost(level, expected_nodes(level));
}

bool DraftController::could_pay(int level) const {
  const int b = model_.ladder()[level];
  return level > 0 && (1.0 + b) / step_cost(level, b) > score(0);
}

// The largest level that could pay and costs at most warmup_cost plain steps (0: none).
int DraftController::warmup_level() const {
  const double cap = opt_.warmup_cost * step_cost(0, 0);
  for (int l = model_.levels() - 1; l > 0; --l)
    if (could_pay(l) && step_cost(l, model_.ladder()[l]) <= cap) return l;
  return 0;
}

// Steps between probes above `pick`: probe_every, or more when a probe's extra cost would take more than
// probe_share of the step time.
int DraftController::probe_interval(int pick) const {
  const double base = step_cost(pick, expected_nodes(pick));
  const double extra = step_cost(pick + 1, model_.ladder()[pick + 1]) - base;
  const double need = extra / std::max(1e-12, opt_.probe_share * base);
  return std::max(opt_.probe_every, static_cast<int>(std::min(need, 1e6)));
}

int DraftController::choose(int context) {
  context_ = std::clamp(context, 0, static_cast<int>(ctx_.size()) - 1);
  const int top = model_.levels() - 1;
  probe_ = false;
  int pick = 0;
  if (top > 0) {
    const int warm = counters_.steps < opt_.warmup_steps ? warmup_level() : 0;
    if (warm > 0) {
      pick = warm;
      ++counters_.warmup_steps;
    } else {
      double best = score(0);
      const double plain_cost = step_cost(0, 0);
      for (int l = 1; l <= top; ++l) {
        const double sc = score(l);
        // Over a plain step, a draft that costs more must win by min_gain (estimates are noisy; a plain step is
        // the safe default); among drafts, a larger one within prefer_larger wins.
        const bool costlier = step_cost(l, expected_nodes(l)) > plain_cost * (1 + 1e-9);
        const bool ok = pick == 0 && costlier ? sc > best * (1 + opt_.min_gain) : sc >= best * (1 - opt_.prefer_larger);
        if (ok && could_pay(l)) {
          pick = l;
          best = std::max(best, sc);
        }
      }
      if (pick < top && ++since_probe_[context_] >= probe_interval(pick)) {
        since_probe_[context_] = 0;
        if (could_pay(pick + 1)) {
          ++pick;
          probe_ = true;
          ++counters_.probe_steps;
        }
      }
      if (pick == top) since_probe_[context_] = 0;
    }
  }
  level_ = pick;
  const int b = model_.ladder()[pick];
  s_.set_draft_budget(b);
  ++counters_.steps;
  ++counters_.budget_hist[b];
  ++ctx_steps_[context_ * model_.levels() + pick];
  if (b == 0) ++counters_.plain_steps;
  return b;
}

void DraftController::observe(const StepPlan& plan, const Verdict& v, double host_seconds) {
  const int n = plan.size();
  rank_.assign(n, 0);
  int r = 0;
  for (int i = 1; i < n; ++i)
    if (plan.draft[i]) rank_[i] = ++r;
  path_ranks_.clear();
  for (size_t k = 1; k < v.path.size(); ++k) {
    const int node = v.path[k];
    if (node <= 0 || node >= n || !plan.draft[node]) break;
    path_ranks_.push_back(rank_[node]);
  }
  accepted_by_budget(model_.ladder(), level_, path_ranks_, r, acc_, nodes_);
  model_.observe(level_, acc_, nodes_);
  if (ctx_.size() > 1) ctx_[context_].observe(level_, acc_, nodes_);
  if (host_seconds >= 0) {
    host_s_[level_] = host_seen_[level_] ? host_s_[level_] + 0.1 * (host_seconds - host_s_[level_]) : host_seconds;
    host_seen_[level_] = 1;
  }
}

}  // namespace la
