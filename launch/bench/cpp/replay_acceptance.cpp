// Replays greedy traces through a drafting strategy without a model: the acceptance benchmark's engine side
// (launch/bench/peers/bench-acceptance.sh). A greedy trace is the model's argmax chain, so a draft node is accepted exactly when
// its root path equals the trace: no forward is needed to know what verification would accept.
//
//   la_replay_acceptance --input traces.jsonl --budget 16 --strategy suffix [--cold] [strategy flags...]
//
// traces.jsonl: {"prompt_ids": [...], "ids": [...]} per line (generate's --output records are such lines).
// Each step plans at the fixed budget (Strategy::set_draft_budget), verifies against the trace, and feeds the
// verdict back as the step runner (StepRunner) does. --cold: a new strategy per request (nothing carried over); otherwise one
// strategy serves every request in file order (warm: earlier outputs in the trie or the global suffix tree).
// Prints one JSON line: steps, new tokens, accepted draft tokens, their mean per step, and the strategy's counters.
// Only strategies whose drafts do not depend on the model's outputs at non-accepted nodes fit (trie, suffix,
// prompt-lookup); LADE's window and Ouroboros' draft model need a model.
//
// --budget -1: the strategy's fixed parameters (generate's --adaptive off). --adaptive: the draft controller picks
// every step's budget as generate does (the strategy's context classes, warm-up, probes), over a frozen step cost
// given by --cost "T:c,..." (a forward of T plan tokens costs c, e.g. measured by `lookahead bench-forward`;
// linear between points, the last slope beyond). With --cost, the output adds the simulated cost of the steps
// run (sum of cost(plan tokens)) and tokens per cost relative to plain decoding (1 token per cost(1)): the
// controller judged on a real trace and a measured cost curve without the timing noise of a shared machine.
// REPLAY_DEBUG=1: one stderr line per step, "class|size hint|budget (-1: fixed)|plan nodes|accepted".
// REPLAY_DEBUG2=1 (with --adaptive): before each step, the controller's expected accepted tokens and score per level.
#include <boost/program_options.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lookahead/decode/draft_controller.h"
#include "lookahead/decode/step_plan.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/options/parse.h"
#include "lookahead/options/strategy_options.h"
#include "lookahead/util/error.h"

namespace po = boost::program_options;

namespace {

struct Trace {
  std::vector<int32_t> prompt, ids;
};

// "T:c,T:c,..." (increasing T) -> a frozen forward cost model with every bucket read off the polyline.
la::StepCostModel parse_cost(const std::string& spec) {
  std::vector<std::pair<double, double>> pts;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto colon = item.find(':');
    LA_CHECK(colon != std::string::npos, "replay: --cost item '", item, "' is not T:c");
    const double t = std::stod(item.substr(0, colon)), c = std::stod(item.substr(colon + 1));
    LA_CHECK(t >= 1 && c > 0 && (pts.empty() || t > pts.back().first), "replay: --cost '", spec,
             "' needs increasing T >= 1 and costs > 0");
    pts.emplace_back(t, c);
  }
  LA_CHECK(pts.size() >= 2, "replay: --cost needs at least two points");
  auto at = [&](double t) {
    size_t i = 1;
    while (i + 1 < pts.size() && pts[i].first < t) ++i;
    const auto [t0, c0] = pts[i - 1];
    const auto [t1, c1] = pts[i];
    return std::max(1e-9, c0 + (c1 - c0) * (t - t0) / (t1 - t0));
  };
  la::ForwardCostModel fwd(256);
  for (int b : fwd.buckets()) fwd.set(b, at(b));
  la::StepCostModel cost(fwd);
  cost.freeze();
  return cost;
}

}  // namespace

int main(int argc, char** argv) try {
  la::StrategyOptions so;
  std::string input;
  int budget = 16;
  bool cold = false, adaptive = false;
  std::string cost_spec;
  po::options_description d("la_replay_acceptance");
  d.add_options()("help", "this help")("input", po::value(&input)->required(), "traces JSONL")(
      "budget", po::value(&budget)->default_value(16), "draft nodes per step (-1: the fixed parameters)")(
      "adaptive", po::bool_switch(&adaptive), "the draft controller picks each step's budget (needs --cost)")(
      "cost", po::value(&cost_spec), "step cost T:c,... (plan tokens : relative seconds)")(
      "cold", po::bool_switch(&cold), "a new strategy per request");
  so.name = "suffix";  // the default --strategy here (trie | suffix | prompt-lookup fit)
  la::add_strategy_options(d, so);
  po::variables_map vm;
  if (!la::parse_checked(argc, argv, d, vm)) {  // --help
    std::cout << d;
    return 0;
  }
  LA_CHECK(so.name == "trie" || so.name == "suffix" || so.name == "prompt-lookup",
           "replay: --strategy must be trie, suffix or prompt-lookup (got '", so.name, "')");
  so.validate();
  LA_CHECK(!adaptive || !cost_spec.empty(), "replay: --adaptive needs --cost");
  la::StepCostModel cost = cost_spec.empty() ? la::StepCostModel() : parse_cost(cost_spec);

  std::vector<Trace> traces;
  std::ifstream in(input);
  LA_CHECK(in.good(), "replay: cannot open '", input, "'");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    traces.push_back({j.at("prompt_ids").get<std::vector<int32_t>>(), j.at("ids").get<std::vector<int32_t>>()});
  }

  std::unique_ptr<la::Strategy> s;
  std::unique_ptr<la::DraftController> ctl;  // lives as long as the strategy, as in generate
  double sim_cost = 0;
  std::map<std::string, std::map<int, int64_t>> by_context;  // adaptive: context class -> budget -> steps
  int64_t plain_steps = 0;
  la::StepPlan plan;
  la::Verdict verdict;
  const bool debug = getenv("REPLAY_DEBUG") != nullptr, debug2 = getenv("REPLAY_DEBUG2") != nullptr;
  std::vector<int32_t> results, seq, depth;
  std::vector<uint8_t> on;
  int64_t steps = 0, tokens = 0, accepted = 0;
  for (const auto& t : traces) {
    if (!s || cold) {
      s = la::make_strategy(so);
      if (adaptive) ctl = std::make_unique<la::DraftController>(*s, cost);
    }
    s->set_draft_budget(budget);
    seq = t.prompt;
    s->begin_request(seq);
    size_t g = 0;  // trace tokens generated so far
    while (g < t.ids.size()) {
      const int max_depth = static_cast<int>(t.ids.size() - g) - 1;
      // The step's context class, matched once (as StepRunner does) when the controller or the debug line needs it.
      const int ctx = ctl || debug ? s->draft_context(seq, max_depth) : 0;
      std::string dbg_label;
      int dbg_hint = -1;
      if (debug) {
        dbg_label = s->draft_context_label(ctx);
        dbg_hint = s->draft_size_hint();
      }
      if (ctl) {
        const int b = ctl->choose(ctx);
        if (debug2) {
          std::cerr << "  ctx " << s->draft_context_label(ctx) << " hint " << s->draft_size_hint() << " pick " << b;
          for (int l = 0; l < (int)ctl->ladder().size(); ++l)
            std::cerr << " [" << ctl->ladder()[l] << ": a" << ctl->expected_accepted(l) << " s" << ctl->score(l) << "]";
          std::cerr << "\n";
        }
        ++by_context[s->draft_context_label(ctx)][b];
        plain_steps += b == 0;
      }
      s->plan(seq, max_depth, plan);
      // results[i]: the trace's next token after node i when node i's root path follows the trace; -1 elsewhere
      // (never reached by the verifier, which only follows matching children).
      const int n = plan.size();
      results.assign(n, -1);
      on.assign(n, 0);
      depth.assign(n, 0);
      on[0] = 1;
      for (int i = 0; i < n; ++i) {
        if (i > 0) {
          const int p = plan.parents[i];
          depth[i] = depth[p] + 1;
          const size_t pos = g + static_cast<size_t>(depth[i]) - 1;
          on[i] = on[p] && pos < t.ids.size() && plan.tokens[i] == t.ids[pos];
        }
        const size_t next = g + static_cast<size_t>(depth[i]);
        if (on[i] && next < t.ids.size()) results[i] = t.ids[next];
      }
      la::verify_plan(plan, results, verdict);
      LA_CHECK(!verdict.tokens.empty() && verdict.tokens.back() >= 0, "replay: verification left the trace");
      s->update(seq, plan, results, verdict);
      if (ctl) ctl->observe(plan, verdict, -1.0);
      if (debug)
        std::cerr << dbg_label << "|" << dbg_hint << "|" << (ctl ? ctl->last_budget() : -1) << "|" << plan.size() - 1
                  << "|" << verdict.path.size() - 1 << "\n";  // no host time: the forward's cost alone
      sim_cost += cost.step_seconds(plan.size());
      accepted += static_cast<int64_t>(verdict.path.size()) - 1;
      tokens += static_cast<int64_t>(verdict.tokens.size());
      for (int32_t x : verdict.tokens) seq.push_back(x);
      g += verdict.tokens.size();
      ++steps;
    }
    s->end_request(seq);
  }
  nlohmann::json out = {{"strategy", so.name},
                        {"budget", budget},
                        {"cold", cold},
                        {"requests", traces.size()},
                        {"steps", steps},
                        {"new_tokens", tokens},
                        {"accepted", accepted},
                        {"mean_accepted", steps ? double(accepted) / double(steps) : 0.0},
                        {"counters", s ? s->counters() : std::map<std::string, double>{}}};
  if (!cost_spec.empty()) {
    out["sim_cost"] = sim_cost;
    out["x_plain"] = sim_cost > 0 ? double(tokens) * cost.step_seconds(1) / sim_cost : 0.0;
  }
  if (adaptive) {
    out["plain_share"] = steps ? double(plain_steps) / double(steps) : 0.0;
    nlohmann::json by;
    for (const auto& [label, h] : by_context)
      for (const auto& [b, n] : h) by[label][std::to_string(b)] = n;
    out["budget_by_context"] = by;
  }
  std::cout << out.dump() << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "la_replay_acceptance: error: " << e.what() << "\n";
  return 1;
}
