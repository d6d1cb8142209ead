// Shared helpers for model-level tests.
#pragma once
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lookahead/decode/cost_calibration.h"
#include "lookahead/decode/draft_controller.h"
#include "lookahead/decode/executor.h"
#include "lookahead/decode/generator.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/engine/llama.h"
#include "lookahead/tokenizer/tokenizer.h"
#include "lookahead/util/json_parse.h"

#include "common/shared_data.h"

namespace la::test {

// First n story prompts plus a few repetitive texts.
inline std::vector<std::string> prompt_texts(int n) {
  std::ifstream in(shared_dir() + "/datasets/tinystories/prompts.jsonl");
  std::vector<std::string> out;
  std::string line;
  while (static_cast<int>(out.size()) < n && std::getline(in, line))
    out.push_back(parse_json(line)["prompt"].get<std::string>());
  out.push_back("the cat sat on the mat. the cat sat on the mat. the cat sat on the mat. the cat");
  out.push_back("one two three four five one two three four five one two three");
  out.push_back("Tom said hello. Tom said hello. Tom said hello. Tom said");
  return out;
}

// Token ids for a model: encoded with the stories tokenizer, folded into the model's vocabulary.
inline std::vector<std::vector<int32_t>> prompt_ids(int n, int vocab) {
  auto tok = Tokenizer::load(stories(), 1);
  std::vector<std::vector<int32_t>> out;
  for (auto& t : prompt_texts(n)) {
    auto ids = tok->encode(t);
    for (auto& x : ids) x %= vocab;
    out.push_back(ids);
  }
  return out;
}

inline std::vector<std::vector<int32_t>> run_all(StepModel& m, Strategy& s, const std::vector<std::vector<int32_t>>& ps,
                                                 const GenParams& gp, RequestStats* total = nullptr) {
  LocalExecutor ex(m);
  Generator g(ex, s, m.config());
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < ps.size(); ++i) {
    GenParams p = gp;
    p.sample.stream = i;
    auto r = g.generate(ps[i], p);
    if (total) total->add(r.stats);
    out.push_back(r.ids);
  }
  return out;
}

// Adaptive drafting with a given cost model: the executor feeds it (unless frozen), a controller chooses budgets.
// Tiny: a frozen forward of 1 us per step plus 1 us per token with the measured host time charged, so the
// strategy's own bookkeeping outweighs the forward and the controller's ledger puts it to sleep and wakes it again
// and again (dormancy, draft_controller.h: plain steps without the strategy, which then catches up with the
// sequence). The fixed microsecond gives a draft row headroom (a row costs half a token's worth): with none, as
// at 1 us per token alone, the exploration allowance never grows and a sleeping strategy rightly never wakes.
enum class CostShape { Calibrated, Flat, Steep, Tiny };
inline StepCostModel cost_shape(StepModel& m, Strategy& s, CostShape shape) {
  if (shape == CostShape::Calibrated) {
    const int top = s.max_draft_budget();
    return StepCostModel(calibrate_forward_cost(m, 1 + top + s.lookahead_nodes(top)));
  }
  ForwardCostModel f(256);
  for (int t : f.buckets())
    f.set(t, shape == CostShape::Flat ? 1.0 : shape == CostShape::Tiny ? 1e-6 * (t + 1) : 1.0 * t * t);
  StepCostModel c(f);
  c.freeze();  // no timing can move an extreme shape
  return c;
}

inline std::vector<std::vector<int32_t>> run_all_adaptive(StepModel& m, Strategy& s,
                                                          const std::vector<std::vector<int32_t>>& ps,
                                                          const GenParams& gp, CostShape shape,
                                                          RequestStats* total = nullptr) {
  StepCostModel cost = cost_shape(m, s, shape);
  AdaptiveOptions ao;
  ao.host_overhead = shape == CostShape::Calibrated || shape == CostShape::Tiny;  // else: independent of timings
  if (shape == CostShape::Tiny) {  // a quick refill: it wakes within a few steps of falling asleep
    ao.explore_share = 0.5;
    ao.explore_credit = 1;
  }
  DraftController ctl(s, cost, ao);
  LocalExecutor ex(m);
  Generator g(ex, s, m.config());
  g.set_controller(&ctl);
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < ps.size(); ++i) {
    GenParams p = gp;
    p.sample.stream = i;
    auto r = g.generate(ps[i], p);
    if (total) total->add(r.stats);
    out.push_back(r.ids);
  }
  return out;
}

}  // namespace la::test
