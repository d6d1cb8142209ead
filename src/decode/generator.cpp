#include "lookahead/decode/generator.h"

#include <time.h>

#include <chrono>

#include "lookahead/util/error.h"

namespace la {
namespace {
using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
}  // namespace

double RequestStats::mean_accepted() const { return steps ? double(new_tokens - steps) / steps : 0.0; }

void RequestStats::add(const RequestStats& o) {
  prompt_tokens += o.prompt_tokens;
  new_tokens += o.new_tokens;
  steps += o.steps;
  draft_tokens += o.draft_tokens;
  lookahead_tokens += o.lookahead_tokens;
  step_tokens += o.step_tokens;
  if (accept_hist.size() < o.accept_hist.size()) accept_hist.resize(o.accept_hist.size(), 0);
  for (size_t i = 0; i < o.accept_hist.size(); ++i) accept_hist[i] += o.accept_hist[i];
  seconds += o.seconds;
  prefill_s += o.prefill_s;
  draft_s += o.draft_s;
  forward_s += o.forward_s;
  verify_s += o.verify_s;
  commit_s += o.commit_s;
  cpu_s += o.cpu_s;
  adaptive = adaptive || o.adaptive;
  budgets.add(o.budgets);
}

void check_fits(const ModelConfig& cfg, size_t prompt_tokens, int max_new_tokens) {
  LA_CHECK(prompt_tokens > 0, "empty prompt: it encodes to no tokens");
  LA_CHECK(max_new_tokens >= 0, "--max-new-tokens must be >= 0 (got ", max_new_tokens, ")");
  // The last forward runs at position max_positions-1 and yields one more token.
  const size_t limit = static_cast<size_t>(cfg.max_positions) + 1;
  LA_CHECK(prompt_tokens <= static_cast<size_t>(cfg.max_positions), "prompt has ", prompt_tokens,
           " tokens but the model's context is ", cfg.max_positions, " positions (max_position_embeddings)");
  LA_CHECK(max_new_tokens == 0 || prompt_tokens + max_new_tokens <= limit, "prompt (", prompt_tokens,
           " tokens) plus --max-new-tokens ", max_new_tokens, " exceeds the model's context of ", cfg.max_positions,
           " positions (at most ", limit - prompt_tokens, " new tokens fit; --max-new-tokens 0 stops at the limit)");
}

GenResult Generator::generate(const std::vector<int32_t>& prompt, const GenParams& gp,
                              const std::function<void(const std::vector<int32_t>&)>& on_tokens) {
  check_fits(cfg_, prompt.size(), gp.max_new_tokens);
  for (auto t : prompt) LA_CHECK(t >= 0 && t < cfg_.vocab, "prompt token id ", t, " outside the vocabulary");
  GenResult r;
  RequestStats& st = r.stats;
  st.prompt_tokens = static_cast<int>(prompt.size());
  const auto t_start = Clock::now();
  std::vector<int32_t> seq = prompt;
  exec_.begin(prompt, gp.sample);
  const auto t_prefill = Clock::now();
  st.prefill_s = secs(t_start, t_prefill);
  strategy_.begin_request(prompt);
  const double cpu0 = thread_cpu_s();
  const int max_new = gp.max_new_tokens > 0 ? gp.max_new_tokens : cfg_.max_positions + 1 - int(prompt.size());
  StepPlan plan;
  std::vector<int32_t> results;
  st.adaptive = controller_ != nullptr;
  if (!controller_) strategy_.set_draft_budget(-1);
  bool done = max_new <= 0;
  if (done) st.finish_reason = "length";
  while (!done) {
    if (gp.cancel && gp.cancel->load(std::memory_order_relaxed)) {
      st.finish_reason = "cancelled";
      break;
    }
    const int root_pos = static_cast<int>(seq.size()) - 1;
    const int max_depth = cfg_.max_positions - 1 - root_pos;
    const auto t0 = Clock::now();
    if (controller_) {
      const int b = controller_->choose(strategy_.draft_context(seq));
      ++st.budgets.steps;
      ++st.budgets.budget_hist[b];
      if (b == 0) ++st.budgets.plain_steps;
      if (controller_->last_was_probe()) ++st.budgets.probe_steps;
    }
    strategy_.plan(seq, max_depth, plan);
    plan.validate();
    LA_CHECK(plan.tokens[0] == seq.back(), "strategy ", strategy_.name(), ": plan root is not the last token");
    const auto t1 = Clock::now();
    exec_.run(seq, plan, results);
    const auto t2 = Clock::now();
    Verdict v = verifier_ ? verifier_(plan, results) : verify_plan(plan, results);
    const auto t2v = Clock::now();
    const std::vector<int32_t> before = seq;
    int kept = 0;
    for (int32_t tok : v.tokens) {
      seq.push_back(tok);
      r.ids.push_back(tok);
      ++kept;
      if (cfg_.is_eos(tok)) { st.finish_reason = "eos"; done = true; break; }
      if (static_cast<int>(r.ids.size()) >= max_new) { st.finish_reason = "length"; done = true; break; }
    }
    std::vector<int32_t> path(v.path.begin(), v.path.begin() + std::min<size_t>(v.path.size(), kept));
    exec_.commit(seq, path);
    const auto t3 = Clock::now();
    strategy_.update(before, plan, results, v);
    const auto t4 = Clock::now();
    if (controller_) controller_->observe(plan, v, secs(t0, t1) + secs(t2, t4));
    st.steps++;
    st.draft_tokens += plan.num_draft();
    st.lookahead_tokens += plan.num_lookahead();
    st.step_tokens += plan.size();
    if (static_cast<int>(st.accept_hist.size()) <= kept) st.accept_hist.resize(kept + 1, 0);
    st.accept_hist[kept]++;
    st.draft_s += secs(t0, t1) + secs(t3, t4);
    st.forward_s += secs(t1, t2);
    st.verify_s += secs(t2, t2v);
    st.commit_s += secs(t2v, t3);
    if (on_tokens) on_tokens(r.ids);
  }
  strategy_.end_request(seq);
  exec_.end();
  st.new_tokens = static_cast<int>(r.ids.size());
  st.seconds = secs(t_start, Clock::now());
  st.cpu_s = thread_cpu_s() - cpu0;
  return r;
}

}  // namespace la
