// Replays greedy traces through a drafting strategy without a model: the acceptance benchmark's engine side
// (launch/bench-acceptance.sh). A greedy trace is the model's argmax chain, so a draft node is accepted exactly when
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
#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lookahead/decode/step_plan.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/util/error.h"

namespace po = boost::program_options;

namespace {

class Flags final : public la::StrategyFlags {
 public:
  explicit Flags(po::options_description& d) : d_(d) {}
  void add(const std::string& f, int* v, const std::string& h) override { bind(f, v, h); }
  void add(const std::string& f, int64_t* v, const std::string& h) override { bind(f, v, h); }
  void add(const std::string& f, double* v, const std::string& h) override { bind(f, v, h); }
  void add(const std::string& f, std::string* v, const std::string& h) override { bind(f, v, h); }
  void add_switch(const std::string& f, bool* v, const std::string& h) override {
    d_.add_options()(f.c_str(), po::bool_switch(v), h.c_str());
  }

 private:
  template <class T>
  void bind(const std::string& f, T* v, const std::string& h) {
    d_.add_options()(f.c_str(), po::value(v)->default_value(*v), h.c_str());
  }
  po::options_description& d_;
};

struct Trace {
  std::vector<int32_t> prompt, ids;
};

}  // namespace

int main(int argc, char** argv) try {
  la::StrategyOptions so;
  std::string input;
  int budget = 16;
  bool cold = false;
  po::options_description d("la_replay_acceptance");
  d.add_options()("help", "this help")("input", po::value(&input)->required(), "traces JSONL")(
      "budget", po::value(&budget)->default_value(16), "draft nodes per step")(
      "cold", po::bool_switch(&cold), "a new strategy per request")(
      "strategy", po::value(&so.name)->default_value("suffix"), "trie | suffix | prompt-lookup");
  Flags flags(d);
  for (const auto& e : la::strategy_registry()) e.flags(flags, so);
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, d), vm);
  if (vm.count("help")) {
    std::cout << d;
    return 0;
  }
  po::notify(vm);
  LA_CHECK(so.name == "trie" || so.name == "suffix" || so.name == "prompt-lookup",
           "replay: --strategy must be trie, suffix or prompt-lookup (got '", so.name, "')");
  so.validate();

  std::vector<Trace> traces;
  std::ifstream in(input);
  LA_CHECK(in.good(), "replay: cannot open '", input, "'");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    traces.push_back({j.at("prompt_ids").get<std::vector<int32_t>>(), j.at("ids").get<std::vector<int32_t>>()});
  }

  std::unique_ptr<la::Strategy> s;
  la::StepPlan plan;
  la::Verdict verdict;
  std::vector<int32_t> results, seq, depth;
  std::vector<uint8_t> on;
  int64_t steps = 0, tokens = 0, accepted = 0;
  for (const auto& t : traces) {
    if (!s || cold) s = la::make_strategy(so);
    s->set_draft_budget(budget);
    seq = t.prompt;
    s->begin_request(seq);
    size_t g = 0;  // trace tokens generated so far
    while (g < t.ids.size()) {
      const int max_depth = static_cast<int>(t.ids.size() - g) - 1;
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
  std::cout << out.dump() << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "la_replay_acceptance: error: " << e.what() << "\n";
  return 1;
}
