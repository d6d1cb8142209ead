#include "report.h"

#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "lookahead/engine/selfcheck.h"
#include "lookahead/util/files.h"
#include "lookahead/util/json_parse.h"
#include "request_loop.h"
#include "signals.h"

using json = nlohmann::json;

namespace la::cli {
namespace {

json adaptive_stats(const RunReport& r) {
  json a = adaptive_json(r.loop.total.budgets);
  json cm = json::object();
  auto& fwd = r.adaptive.cost->forward();
  for (int b : fwd.buckets()) cm[std::to_string(b)] = fwd.seconds(b) * 1e3;
  a["forward_ms_by_tokens"] = cm;
  a["output_row_head_ms"] = fwd.output_row_seconds() * 1e3;  // what a row choosing a token adds (cost_model.h)
  // The table is at reference_context positions a row; each position more adds context_row_us (cost_model.h).
  a["reference_context"] = fwd.reference_context();
  a["context_row_us"] = fwd.context_row_seconds() * 1e6;
  const DraftController& c = *r.adaptive.controller;
  a["ladder"] = c.ladder();
  // Chosen budgets against what the strategy saw before planning (its context classes: match length, ...).
  json by = json::object();
  for (int k = 0; k < c.contexts(); ++k) {
    json h = json::object();
    for (int l = 0; l < static_cast<int>(c.ladder().size()); ++l)
      if (c.context_steps(k, l) > 0) h[std::to_string(c.ladder()[l])] = c.context_steps(k, l);
    if (!h.empty()) by[r.strategy.draft_context_label(k)] = h;
  }
  a["budget_by_context"] = by;
  return a;
}

json dist_stats(const ParallelCounters& dc) {
  return {{"backend", dc.backend}, {"steps", dc.steps},
          {"duplication", dc.plan_nodes ? double(dc.part_nodes) / dc.plan_nodes : 0.0},
          {"disagreements", 0}, {"step_tokens", dc.step_tokens},  // a disagreement ends the run
          {"run_s", dc.run_seconds},
          {"max_forward_s", dc.max_forward_seconds}, {"forward_rank0_s", dc.forward_seconds_rank0},
          {"broadcast_s", dc.broadcast_seconds}, {"gather_wait_s", dc.gather_wait_seconds},
          {"bytes_sent", dc.bytes_sent}, {"bytes_received", dc.bytes_received}};
}

json simulation_stats(const ParallelExecutor& sim, const RequestStats& total) {
  const auto c = sim.counters();
  const double steps = c.steps ? double(c.steps) : 1.0, modelled = sim.modelled_seconds(total.seconds);
  json fwd = json::array(), tok = json::array();
  for (const auto& r : sim.steps()) {  // per step and rank; none when large (ParallelOptions::record_limit)
    json f = json::array();
    for (float x : r.forward_ms) f.push_back(std::round(x * 1000) / 1000);
    fwd.push_back(f);
    tok.push_back(r.step_tokens);
  }
  return {{"ranks", c.ranks}, {"steps", c.steps}, {"new_tokens", total.new_tokens},
          {"collective_latency_us", c.collective_latency_s * 1e6},
          {"measured_seconds", total.seconds}, {"measured_tokens_per_s", total.tokens_per_s()},
          {"forward_seconds", c.forward_seconds}, {"max_forward_seconds", c.max_forward_seconds},
          {"modelled_step_seconds", c.modelled_step_seconds}, {"modelled_seconds", modelled},
          {"modelled_tokens_per_s", modelled > 0 ? total.new_tokens / modelled : 0.0},
          {"measured_step_ms", total.seconds / steps * 1e3}, {"modelled_step_ms", modelled / steps * 1e3},
          {"max_forward_ms_mean", c.max_forward_seconds / steps * 1e3},
          {"mean_tokens_per_rank", double(c.step_tokens) / steps / c.ranks},
          {"duplication", c.plan_nodes ? double(c.part_nodes) / c.plan_nodes : 0.0},
          {"disagreements", 0}, {"per_step_forward_ms", fwd}, {"per_step_tokens", tok}};
}

}  // namespace

json stats_json(const RequestStats& s) {
  json h = json::array();
  for (auto v : s.accept_hist) h.push_back(v);
  return {{"steps", s.steps},
          {"new_tokens", s.new_tokens},
          {"compression", s.compression()},
          {"mean_accepted", s.mean_accepted()},
          {"accept_hist", h},
          {"draft_tokens_per_step", s.steps ? double(s.draft_tokens) / s.steps : 0.0},
          {"lookahead_tokens_per_step", s.steps ? double(s.lookahead_tokens) / s.steps : 0.0},
          {"step_tokens_per_step", s.steps ? double(s.step_tokens) / s.steps : 0.0},
          {"seconds", s.seconds},
          {"prefill_s", s.prefill_s},
          {"draft_s", s.draft_s},
          {"forward_s", s.forward_s},
          {"verify_s", s.verify_s},
          {"commit_s", s.commit_s},
          {"cpu_s", s.cpu_s},
          {"tokens_per_s", s.tokens_per_s()}};
}

json adaptive_json(const AdaptiveCounters& a) {
  json h = json::object();
  for (auto& [b, n] : a.budget_hist)
    if (n > 0) h[std::to_string(b)] = n;  // levels never chosen are kept at 0 so that choosing allocates nothing
  return {{"budget_hist", h}, {"steps", a.steps}, {"plain_steps", a.plain_steps},
          {"plain_fraction", a.steps ? double(a.plain_steps) / a.steps : 0.0}, {"probe_steps", a.probe_steps},
          {"dormant_steps", a.dormant_steps}, {"sleeps", a.sleeps}, {"held_drafts", a.explore_held}};
}

std::string output_text(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids,
                        const std::vector<int32_t>& eos_ids, const std::vector<int32_t>& ids) {
  TextStream whole(tok, prompt_ids, eos_ids);
  return whole.push(ids) + whole.finish();
}

json result_record(const PromptRecord& p, const GenResult& r, const std::string& text, const std::string& strategy,
                   const std::string& stop) {
  json rec = {{"id", p.id},
              {"prompt", p.text},
              {"prompt_ids", p.ids},
              {"ids", r.ids},
              {"text", text},
              {"finish_reason", r.stats.finish_reason},
              {"new_tokens", r.stats.new_tokens},
              {"steps", r.stats.steps},
              {"seconds", r.stats.seconds},
              {"tokens_per_s", r.stats.tokens_per_s()},
              {"strategy", strategy},
              {"stats", stats_json(r.stats)}};
  if (!p.messages.empty()) {
    json m = json::array();
    for (const auto& x : p.messages) m.push_back({{"role", x.role}, {"content", x.content}});
    rec["messages"] = m;
  }
  if (!stop.empty()) rec["stop"] = stop;
  if (r.stats.adaptive) rec["stats"]["adaptive"] = adaptive_json(r.stats.budgets);
  return rec;
}

void write_stats_file(const RunReport& r) {
  if (r.o.stats_path.empty()) return;
  json s = {{"strategy", r.strategy.name()}, {"model", r.o.load.model}, {"aggregate", stats_json(r.loop.total)},
            {"per_prompt", r.loop.per_prompt}, {"counters", r.strategy.counters()}};
  // --batch: "counters" is slot 0's strategy (and the state the slots share); each slot's own are listed too.
  if (r.loop.slot_counters.size() > 1) s["counters_by_slot"] = r.loop.slot_counters;
  if (r.adaptive.controller) s["adaptive"] = adaptive_stats(r);
  if (r.batch && r.batch->steps > 0) {
    const BatchCounters& b = *r.batch;
    s["batch"] = {{"forwards", b.steps},           {"rows", b.rows},
                  {"draft_rows", b.draft_rows},     {"prefill_rows", b.prefill_rows},
                  {"slot_steps", b.slot_steps},     {"max_in_flight", b.max_active},
                  {"forward_s", b.forward_s},       {"draft_gain_s", b.draft_gain_s},
                  {"draft_paid_s", b.draft_paid_s}};
    // The batch's draft caps (draft_cap.h): steps run under each ("none": the strategy's largest budget).
    for (size_t i = 0; i < b.cap_labels.size(); ++i)
      s["batch"]["draft_cap_steps"][b.cap_labels[i]] = b.cap_steps[i];
  }
  s["ranks"] = r.comm.size();
  // Which communicator served the run and whether MPI_Init ever ran (a hand-started process must not need MPI).
  s["comm"] = {{"backend", r.comm.backend()}, {"mpi_initialized", mpi_initialized()}, {"mpi_build", built_with_mpi()}};
  if (r.exec.par && !r.exec.sim()) s["dist"] = dist_stats(r.exec.par->counters());
  if (r.exec.sim()) s["simulation"] = simulation_stats(*r.exec.sim(), r.loop.total);
  for (const auto& c : selfcheck_reports()) s["selfcheck"].push_back(parse_json_checked(c.json(), "selfcheck report"));  // serving path
  write_file_atomic(r.o.stats_path, s.dump(2), "--stats-json file");
}

// When the controller kept most steps plain, say so and why: what a draft step costs here in plain steps, what it
// was expected to accept (it pays when 1 + accepted > cost), and what --adaptive off would do instead.
static void print_mostly_plain(const RunReport& r) {
  const AdaptiveCounters& b = r.loop.total.budgets;
  if (!r.adaptive.controller || b.steps == 0 || b.plain_steps * 2 <= b.steps) return;
  const DraftController& c = *r.adaptive.controller;
  const StepCostModel& cost = *r.adaptive.cost;
  const std::vector<int>& ladder = c.ladder();
  if (ladder.size() < 2) return;
  const double plain = cost.step_seconds(1);
  auto rel = [&](int budget) { return cost.step_seconds(1 + budget + r.strategy.lookahead_nodes(budget)) / plain; };
  const int b1 = ladder[1], top = ladder.back();
  const double e1 = c.acceptance().expected_accepted(1);
  const double et = c.acceptance().expected_accepted(static_cast<int>(ladder.size()) - 1);
  std::ostringstream line;
  line << std::fixed << std::setprecision(2) << r.tag << "adaptive: " << std::setprecision(0)
       << 100.0 * double(b.plain_steps) / double(b.steps) << "% of steps were plain: " << std::setprecision(2)
       << "a draft of " << b1 << " token(s) costs " << rel(b1) << " plain steps here and was expected to accept "
       << e1 << " (it pays above " << rel(b1) - 1 << "); " << top << " costs " << rel(top) << " for an expected "
       << et << ". --adaptive off would draft " << top << " every step (" << r.strategy.name()
       << "'s fixed parameters)";
  if (b.dormant_steps > 0)
    line << "; " << std::setprecision(0) << 100.0 * double(b.dormant_steps) / double(b.steps)
         << "% of steps ran without the strategy (its bookkeeping and drafts cost more than they gained)";
  line << "\n";
  std::cerr << line.str();
}

void print_summary(const RunReport& r) {
  if (r.o.quiet) return;
  const RequestStats& total = r.loop.total;
  std::cerr << std::fixed << r.tag << r.loop.ran << " prompt(s), " << total.new_tokens << " tokens in "
            << total.steps << " steps (S = " << std::setprecision(2) << total.compression() << "), "
            << std::setprecision(3) << total.seconds << " s, " << std::setprecision(1) << total.tokens_per_s()
            << " tokens/s\n";
  print_mostly_plain(r);
  if (!r.exec.sim()) return;
  const int k = r.o.simulate_ranks;
  const double m = r.exec.sim()->modelled_seconds(total.seconds);
  std::cerr << "[lookahead] simulated " << k << " ranks in sequence; modelled " << k
            << "-device run (slowest replica + " << std::setprecision(1) << r.o.collective_latency_us
            << " us per step): " << std::setprecision(3) << m << " s, " << std::setprecision(1)
            << (m > 0 ? total.new_tokens / m : 0.0) << " tokens/s\n";
}

void print_batch_summary(const std::string& tag, int batch, const BatchCounters& c, size_t refused) {
  const double steps = c.steps > 0 ? double(c.steps) : 1.0;
  const double rows = c.rows > 0 ? double(c.rows) : 1.0;
  std::ostringstream l;
  l << std::fixed << std::setprecision(1) << tag << "batch " << batch << ": " << c.steps << " forwards (" << c.forward_s
    << " s), " << c.rows / steps << " rows each (" << 100.0 * c.draft_rows / rows << "% draft, "
    << 100.0 * c.prefill_rows / rows << "% prompt chunks), " << c.slot_steps / steps << " requests decoding per forward, at most " << c.max_active
    << " in flight";
  if (c.draft_paid_s > 0)
    l << "; drafting " << (c.draft_gain_s >= 0 ? "gained " : "lost ") << 100.0 * std::abs(c.draft_gain_s) / c.draft_paid_s
      << "% of the step time over batched plain steps (draft rows as measured)";
  int64_t capped = 0;
  for (int64_t n : c.cap_steps) capped += n;
  if (capped > 0) {
    l << "; draft cap (steps):";
    for (size_t i = 0; i < c.cap_labels.size(); ++i)
      l << (i ? ", " : " ") << c.cap_labels[i] << " " << c.cap_steps[i];
  }
  if (refused > 0) l << "; " << refused << " prompt(s) refused (--kv-memory)";
  std::cerr << l.str() + "\n";
}

int report_interrupted(const RunReport& r) {
  const int sig = stop_signal();
  const std::string& output = r.o.output;
  std::cerr << (r.tag + "interrupted by " + signal_name(sig) + ": " + std::to_string(r.loop.already + r.loop.ran) +
                " of " + std::to_string(r.prompts) + " prompt(s) done" +
                (output.empty() ? std::string() : " in '" + output + "'; rerun with --resume to continue") +
                (r.loop.dropped ? " (the request in flight was dropped)" : "") + "\n");
  return interrupted_exit_code(sig);
}

}  // namespace la::cli
