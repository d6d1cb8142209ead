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
  explore_held += o.explore_held;
  dormant_steps += o.dormant_steps;
  sleeps += o.sleeps;
}

DraftController::DraftController(Strategy& strategy, StepCostModel& cost, AdaptiveOptions opt)
    : s_(strategy), cost_(cost), opt_(opt), model_(strategy.draft_ladder(), opt.decay) {
  LA_CHECK(model_.ladder().back() == std::max(0, strategy.max_draft_budget()),
           "draft controller: the ladder of ", strategy.name(), " does not end at its largest budget");
  LA_CHECK(opt_.probe_every >= 1 && opt_.warmup_steps >= 0 && opt_.probe_share > 0 && opt_.warmup_cost >= 1,
           "draft controller: bad options");
  ctx_.assign(std::max(1, strategy.draft_contexts()), model_);
  since_probe_.assign(ctx_.size(), 0);
  class_warm_.assign(ctx_.size(), 0);
  class_probes_.assign(ctx_.size(), 0);
  ctx_steps_.assign(ctx_.size() * model_.levels(), 0);
  host_s_.assign(model_.levels(), 0.0);
  host_seen_.assign(model_.levels(), 0);
  for (int b : model_.ladder()) counters_.budget_hist[b] = 0;  // every level's node now: choosing allocates nothing
  // observe()'s scratch for the largest plan (root, draft, lookahead nodes): no step allocates when a plan first
  // grows (a batch's cap changes budgets mid-request).
  const int top = model_.ladder().back();
  const size_t plan = static_cast<size_t>(2 + top + strategy.lookahead_nodes(top));
  rank_.reserve(plan);
  path_ranks_.reserve(plan);
  acc_.reserve(model_.ladder().size());
  nodes_.reserve(model_.ladder().size());
}

double DraftController::host(int level) const {
  if (!opt_.host_overhead) return 0.0;
  for (int l = level; l >= 0; --l)
    if (host_seen_[l]) return host_s_[l];
  return 0.0;
}

double DraftController::base_s() const {
  const double full = other_rows_ + 1;
  return cost_.step_seconds(std::max(1.0, full - chunk_rows_));
}

double DraftController::token_price() const {
  const double d = other_slots_ + 1;
  return cost_.step_seconds(d) / d;
}

// `rows` more rows than the plain step, priced where the step sits on the cost curve (prompt chunks included).
double DraftController::extra_s(double rows) const {
  const double full = other_rows_ + 1;
  return cost_.step_seconds(full + rows) - cost_.step_seconds(full);
}

double DraftController::step_cost(int level, double nodes) const {
  const int b = model_.ladder()[level];
  return base_s() + extra_s(nodes + s_.lookahead_nodes(b)) + host(level);
}

// A context class seen before uses its own statistics (levels it never planned borrow its nearest planned level
// below, like any AcceptanceModel); a class never seen uses the strategy-wide ones.
// A class that only ran plain steps (weight only at level 0) knows nothing about drafting: strategy-wide too.
const AcceptanceModel& DraftController::current() const {
  const auto& c = ctx_[context_];
  return model_.levels() > 1 && c.weight(1) > 0 ? c : model_;
}

// A level never planned (in the current class) borrows its nearest planned level below (AcceptanceModel's
// cautious rule), except as follows.
// With a size hint, a level above the highest planned one is extrapolated from it: each extra draft node counts
// r^2 tokens, r = accepted / planned nodes there. A class that accepts its whole plan (r = 1: a copied span) is
// then expected to accept more of a longer one, instead of "no gain above" (which kept such a class at a budget
// whose plan it accepted whole, step after step); a class accepting half its nodes expects a quarter per extra
// node. Planning that level measures it, and the measurement replaces the extrapolation.
double DraftController::expected_accepted(int level) const {
  // With a hint, each level's statistics come from a different set of steps (those whose plan held it), so they
  // need not grow with the budget; a larger budget never accepts less on the same step, so take the running max.
  double below = 0;
  if (hint_ >= 0)
    for (int k = 1; k < level; ++k) below = std::max(below, accepted_at(k));
  return std::max(below, accepted_at(level));
}

double DraftController::accepted_at(int level) const {
  const AcceptanceModel& c = current();
  int l = level;
  while (l > 0 && c.weight(l) <= 0) --l;
  double acc = c.expected_accepted(l);
  if (hint_ >= 0 && l < level && c.weight(l) > 0) acc = extrapolated(l, level);
  // With a hint, a level measured but with less (decayed) weight than the best-measured level below is shrunk
  // toward the extrapolation from that level, with the weight of kPriorSteps observations: one unlucky early
  // plan of a long draft (a warm-up that accepted nothing) would otherwise read "long drafts accept nothing here"
  // for as long as the class lives, since a level above the choice is only measured again by a rare probe, and
  // decay ages its weight but not its mean. A level planned often is judged on its own measurements.
  if (hint_ >= 0 && l == level && level > 0) {
    int h = 0;
    for (int k = 1; k < level; ++k)
      if (c.weight(k) > 0 && (h == 0 || c.weight(k) >= c.weight(h))) h = k;
    if (h > 0 && c.weight(h) > c.weight(level))
      acc = (c.sum_accepted(level) + (c.weight(h) - c.weight(level)) * extrapolated(h, level)) / c.weight(h);
  }
  return hint_ >= 0 ? std::min(acc, nodes_at(level)) : acc;
}

// From measured level l to a level above: each extra draft node counts r^2 tokens, r = accepted / held at l.
double DraftController::extrapolated(int l, int level) const {
  const AcceptanceModel& c = current();
  double acc = c.expected_accepted(l);
  const double held = c.expected_nodes(l);
  const double extra = nodes_at(level) - held;
  if (held > 0 && extra > 0) {
    const double r = std::min(1.0, acc / held);
    acc += extra * r * r;
  }
  return acc;
}

double DraftController::expected_nodes(int level) const { return current().expected_nodes(level); }

double DraftController::nodes_at(int level) const {
  if (hint_ >= 0) return std::min(model_.ladder()[level], hint_);
  return expected_nodes(level);
}

double DraftController::score(int level) const {
  return (other_tokens_ + 1 + expected_accepted(level)) / step_cost(level, nodes_at(level));
}

bool DraftController::could_pay(int level) const {
  const int b = hint_ >= 0 ? std::min(model_.ladder()[level], hint_) : model_.ladder()[level];
  return level > 0 && b > 0 && (other_tokens_ + 1.0 + b) / step_cost(level, b) > score(0);
}

// This request's share of a step of `step_s` seconds in which it yields 1 + accepted tokens (alone: all of it).
double DraftController::share(double step_s, double accepted) const {
  return step_s * (1 + accepted) / (other_tokens_ + 1 + accepted);
}

// The largest level that could pay and costs at most warmup_cost plain steps (0: none). In a batch, its extra
// rows may cost at most (warmup_cost - 1) times this request's share of a plain step.
int DraftController::warmup_level(int top) const {
  const double plain = step_cost(0, 0);
  const double cap = plain + (opt_.warmup_cost - 1) * share(plain, 0);
  for (int l = top; l > 0; --l)
    if (could_pay(l) && step_cost(l, hint_ >= 0 ? nodes_at(l) : model_.ladder()[l]) <= cap) return l;
  return 0;
}

// Steps between probes above `pick`: probe_every, or more when a probe's extra cost would take more than
// probe_share of this request's step time (its share of a batched step).
int DraftController::probe_interval(int pick, int up) const {
  const double full = step_cost(pick, nodes_at(pick));
  const double base = share(full, expected_accepted(pick));
  const double extra = step_cost(up, hint_ >= 0 ? nodes_at(up) : model_.ladder()[up]) - full;
  const double need = extra / std::max(1e-12, opt_.probe_share * base);
  return std::max(opt_.probe_every, static_cast<int>(std::min(need, 1e6)));
}

// The level with the best score among those whose loss if nothing were accepted fits `room` (the ledger's).
// Over a plain step, a draft that costs more must win by min_gain (estimates are noisy; a plain step is the safe
// default); among drafts, a larger one within prefer_larger wins.
int DraftController::best_level(double room, int top) const {
  int pick = 0;
  double best = score(0);
  const double plain_cost = step_cost(0, 0);
  for (int l = 1; l <= top; ++l) {
    if (worst_loss(l) > room) continue;
    const double sc = score(l);
    const bool costlier = step_cost(l, nodes_at(l)) > plain_cost * (1 + 1e-9);
    const bool ok = pick == 0 && costlier ? sc > best * (1 + opt_.min_gain) : sc >= best * (1 - opt_.prefer_larger);
    if (ok && could_pay(l)) {
      pick = l;
      best = std::max(best, sc);
    }
  }
  return pick;
}

// What planning `level` loses over a plain step if nothing is accepted (an unplanned level costed full).
double DraftController::worst_loss(int level) const {
  const double nodes = hint_ >= 0 ? nodes_at(level) : model_.ladder()[level];
  return step_cost(level, nodes) - step_cost(0, 0);
}

// The loss drafting may still risk: what it has gained so far, plus the exploration allowance (explore_share of
// all steps' time, each step's weighed by its headroom) and explore_credit lone plain steps.
double DraftController::room() const {
  const DraftLedger& l = *ledger_;
  return l.gain_s - l.held_s + l.allow_s + opt_.explore_credit * cost_.step_seconds(1);
}

// At the coming step's size an accepted token is worth token_price() and a draft of b rows costs extra_s(b): the best
// over the ladder's budgets of what b accepted tokens gain over their worth, 1 - extra_s(b) / (b price), is the
// most any draft could gain per row it risks (1 on a flat cost, 0 where every row costs a whole token). Not one
// row's alone: where the first extra row costs a step (the CPU's sketched head serves a plain step of up to 4
// requests; a 5th row pays the whole head, SmolLM2 --batch 4: 0.8 of a token's worth) and the next rows little,
// one row read 0.2 while an 8-row draft could gain 0.85, and the exploration allowance refilled so slowly that one
// failed try after a sleep kept a strategy whose drafts paid 20% asleep for hundreds of steps.
double DraftController::headroom() const {
  const double price = token_price();
  if (price <= 0) return 0.0;
  double best = 0;
  for (const int b : model_.ladder())
    if (b > 0) best = std::max(best, 1 - extra_s(b) / (b * price));
  return std::min(best, 1.0);
}

int DraftController::choose(int context) {
  context_ = std::clamp(context, 0, static_cast<int>(ctx_.size()) - 1);
  // A hint of 0 (nothing to draft this step) is not used: the plan is empty whatever the budget, and the step
  // is counted at the budget the statistics choose (not as a plain step the controller chose), as before hints.
  hint_ = s_.draft_size_hint();
  empty_ = hint_ == 0;
  if (empty_) hint_ = -1;
  const int all = model_.levels() - 1;
  int top = all;  // the largest level the batch's cap allows
  while (cap_ >= 0 && top > 0 && model_.ladder()[top] > cap_) --top;
  probe_ = false;
  int pick = 0;
  const double r = top > 0 ? room() : 0.0;  // what the ledger can risk, read once
  if (top > 0 && exact_) {
    // The batch's exact cap: the cap, if the ledger can risk it (the bound on what drafting loses holds).
    pick = worst_loss(top) <= r ? top : best_level(r, top);
    if (pick < top) ++counters_.explore_held;
  } else if (top > 0) {
    int warm = counters_.steps < opt_.warmup_steps ? warmup_level(top) : 0;
    // A class's warm-up, with a size hint: its first warmup_steps drafts plan the whole draft (one step measures
    // every level below it), so a class of long chained matches is judged on long drafts from the start instead
    // of climbing one level per probe from the strategy-wide choice.
    bool class_warm = false;
    if (warm == 0 && hint_ > 0 && class_warm_[context_] < opt_.warmup_steps) {
      int l = 1;
      while (l < top && model_.ladder()[l] < hint_) ++l;
      if (could_pay(l)) {
        warm = l;
        class_warm = true;
      }
    }
    if (warm > 0 && worst_loss(warm) > r) {  // the ledger cannot risk it now
      warm = 0;
      ++counters_.explore_held;
    }
    if (warm > 0) {
      pick = warm;
      if (class_warm) ++class_warm_[context_];
      ++counters_.warmup_steps;
    } else {
      pick = best_level(r, top);
      // No probe above a plan that already holds the whole draft (a larger budget is the same plan).
      const int up = pick + 1;
      const bool whole = hint_ >= 0 && model_.ladder()[pick] >= hint_;
      // A young class probes sooner (after 2, 4, 8, ... of its steps): its first drafts may have failed by chance
      // (two warm-up drafts that accepted nothing would otherwise keep a class of long matches plain for 16+ steps).
      // (The interval is only read below the top level: probe_interval reads level up's cost.)
      if (pick < top && !whole &&
          ++since_probe_[context_] >= std::min(probe_interval(pick, up), 2 << std::min(class_probes_[context_], 20))) {
        if (!could_pay(up)) {
          since_probe_[context_] = 0;
          ++class_probes_[context_];
        } else if (worst_loss(up) <= r) {
          since_probe_[context_] = 0;
          ++class_probes_[context_];
          pick = up;
          probe_ = true;
          ++counters_.probe_steps;
        } else {
          --since_probe_[context_];  // the probe waits until the ledger can risk it (tried again next step)
          ++counters_.explore_held;
        }
      }
      if (pick == top) since_probe_[context_] = 0;
    }
  }
  // A budget at or above the size hint is the whole draft: reported as the largest budget (the same plan; the
  // statistics only learn the levels the plan held, see observe), so "drafts the whole draft" reads the same
  // whichever of the equal levels scored highest.
  if (hint_ >= 0 && pick > 0 && model_.ladder()[pick] >= hint_) pick = all;
  plain_s_ = base_s();
  price_s_ = token_price();
  level_ = pick;
  ledger_->held_s -= held_s_;  // a choose() without observe() (a cancelled step) holds nothing twice
  held_s_ = pick > 0 ? std::max(0.0, worst_loss(pick)) : 0.0;
  ledger_->held_s += held_s_;
  const int b = model_.ladder()[pick];
  s_.set_draft_budget(b);
  ++counters_.steps;
  ++counters_.budget_hist[b];
  ++ctx_steps_[context_ * model_.levels() + pick];
  if (b == 0) ++counters_.plain_steps;
  return b;
}

void DraftController::observe(const StepPlan& plan, const Verdict& v, double host_seconds, int kept) {
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
  // With a size hint the statistics of a level are those of plans that held its whole budget: a budget is costed
  // at min(b, hint) nodes, so its acceptance must not be diluted by steps whose draft was smaller (a level-16
  // average over 2-node drafts would make a 16-node draft look worthless). Levels above the plan's size learn
  // nothing from this step.
  int upto = level_;
  if (hint_ >= 0)
    while (upto > 0 && model_.ladder()[upto] > r) --upto;
  accepted_by_budget(model_.ladder(), upto, path_ranks_, r, acc_, nodes_);
  // A step whose strategy had nothing to draft (size hint 0) says nothing about drafting: only its class sees it.
  if (!empty_ || ctx_.size() == 1) model_.observe(upto, acc_, nodes_);
  if (ctx_.size() > 1) ctx_[context_].observe(upto, acc_, nodes_);
  if (host_seconds >= 0) {
    host_s_[level_] = host_seen_[level_] ? host_s_[level_] + 0.1 * (host_seconds - host_s_[level_]) : host_seconds;
    host_seen_[level_] = 1;
  }
  // The ledger: against a plain step without a strategy, this step gained its accepted tokens at that step's
  // price per token (its share of a batched plain step) and paid its extra rows (the cost model's price) and the
  // strategy's host time (measured).
  ledger_->held_s -= held_s_;
  held_s_ = 0;
  const int used = kept < 0 ? static_cast<int>(path_ranks_.size()) : std::max(0, kept - 1);
  const double accepted = static_cast<double>(std::min(static_cast<int>(path_ranks_.size()), used));
  const double priced = extra_s(r + s_.lookahead_nodes(model_.ladder()[level_]));
  const double c = 0.15 * plain_s_;
  const double fwd = plain_s_ + (measured_ ? std::clamp(measured_extra_, priced - c, 4 * priced + c) : priced);
  measured_ = false;
  const double host_s = opt_.host_overhead ? std::max(0.0, host_seconds) : 0.0;
  ledger_->gain_s += accepted * price_s_ - (fwd + host_s - plain_s_);
  const double paid = share(fwd + host_s, accepted);
  ledger_->paid_s += paid;
  ledger_->allow_s += opt_.explore_share * headroom() * paid;
  settle();
}

void DraftController::observe_dormant() {
  measured_ = false;  // a batch gives every slot its share, asleep or not
  plain_s_ = base_s();
  const double paid = share(plain_s_, 0);
  ledger_->paid_s += paid;
  ledger_->allow_s += opt_.explore_share * headroom() * paid;
  ++counters_.steps;
  ++counters_.plain_steps;
  ++counters_.dormant_steps;
  ++counters_.budget_hist[0];
  settle();
}

void DraftController::charge(double seconds) {
  if (!opt_.host_overhead || seconds <= 0) return;
  ledger_->gain_s -= seconds;
  settle();
}

void DraftController::settle() {
  if (model_.levels() <= 1) return;  // nothing to draft: nothing to sleep from
  const double r = room();
  DraftLedger& l = *ledger_;
  if (!l.dormant && r < 0) {
    l.dormant = true;
    ++counters_.sleeps;
  } else if (l.dormant && r >= opt_.explore_credit * cost_.step_seconds(1)) {
    l.dormant = false;
  }
}

}  // namespace la
