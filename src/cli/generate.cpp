// `lookahead generate`: the flow of one run. Each stage lives in its own file:
//   generate_options  flags bound to GenerateOptions, checks before anything loads
//   prompt_input      --prompt / --input records, chat templates, token ids
//   run_setup         ranks and their groups (--lp-size), tokenizer and models, rank agreement, worker hand-off,
//                     strategy, adaptive drafting
//   run_executor      the executor a group's owner drives
//   job_queue         which requests a group's owner runs (world rank 0's queue), and the one --output writer
//   request_loop      the requests in turn (streaming, records, progress, clean stop); batch_loop: many at once
//   report            records, --stats-json, summary and interrupted lines
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include "batch_loop.h"
#include "cli.h"
#include "lookahead/model/dtype.h"
#include "lookahead/decode/cost_calibration.h"
#include "lookahead/dist/comm.h"
#include "lookahead/util/clock.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "generate_options.h"
#include "job_queue.h"
#include "layout_model.h"
#include "prompt_input.h"
#include "report.h"
#include "request_loop.h"
#include "run_executor.h"
#include "run_setup.h"
#include "signals.h"

namespace la::cli {
namespace {

// --output (rank 0): refuses to clobber a non-empty file unless --overwrite; with --resume, which prompts it
// already holds (skip[i] = 1).
std::vector<char> open_output(const GenerateOptions& o, const std::vector<PromptRecord>& prompts, bool root,
                              JsonlOutput& out) {
  if (!o.output.empty() && root) out = JsonlOutput(o.output, o.job.output_mode());
  if (!out.is_open() || !o.job.resume) return std::vector<char>(prompts.size(), 0);
  std::vector<nlohmann::json> ids;
  std::vector<std::string> texts;
  for (const auto& p : prompts) ids.push_back(p.id), texts.push_back(p.text);
  return resumed_prompts(out, o.output, ids, texts);
}

// The files rank 0 writes after requests finish (--stats-json at the end; the draft state files after every
// finished request): a path it cannot write fails here, before the model loads, not after the job's work.
void check_state_outputs(const GenerateOptions& o) {
  if (!o.stats_path.empty()) check_file_writable(o.stats_path, "--stats-json file");
  if (!o.strategy.trie.state.empty()) check_file_writable(o.strategy.trie.state, "trie state file");
  if (!o.strategy.suffix.state.empty()) check_file_writable(o.strategy.suffix.state, "suffix state file");
  if (!o.strategy.ouroboros.pool_state.empty())
    check_file_writable(o.strategy.ouroboros.pool_state, "phrase pool state file");
}

// Bytes of one KV cache row (every layer's K and V) in the run's dtype.
int64_t kv_row_bytes(const ModelConfig& c, const std::string& dtype) {
  return int64_t(c.layers) * 2 * c.kv_heads * c.head_dim * wtype_size(parse_dtype_name(dtype));
}

// The KV cache rows --kv-memory holds (0 when not given: the batch's default). A budget below one row is an error
// here, before any prompt runs: as 0 rows it would read as "not given" and bound nothing.
int64_t kv_budget_rows(const GenerateOptions& o, const ModelConfig& c) {
  if (o.kv_bytes <= 0) return 0;
  const int64_t row = kv_row_bytes(c, o.load.dtype);
  LA_CHECK(o.kv_bytes >= row, "--kv-memory ", o.kv_memory, " holds no KV cache row: one row of this model in ",
           o.load.dtype, " takes ", row, " bytes (every layer's K and V)");
  return o.kv_bytes / row;
}

// --batch: 1 for a single --prompt, the number given, or auto: the throughput choice over a plain calibration of
// the forward (batch_loop.h), for this group's share of the prompts left. Under lookahead parallelism (ranks or
// --simulate-ranks) the batch's slots live on every replica and every part of a slot's plan holds its root, so each
// rank runs a row per slot even in a plain step: the same choice, with the group's collective latency added to
// every step (its draft rows are left to the adaptive controller, as on one rank).
int resolve_batch(const GenerateOptions& o, int ranks, const std::vector<PromptRecord>& prompts,
                  const std::vector<char>& skip, StepModel& model, const Ranks& r,
                  std::optional<ForwardCostModel>& calibrated) {
  if (o.has_prompt) return 1;  // one stream
  if (o.batch_size > 0) return o.batch_size;
  int left = 0;
  int64_t rows = 0;
  for (size_t i = 0; i < prompts.size(); ++i)
    if (!skip[i])
      ++left, rows += int64_t(prompts[i].ids.size()) + std::max(record_gen(o.gen, prompts[i]).max_new_tokens, 1);
  left = (left + r.groups - 1) / r.groups;  // with several groups, each gets about its share of the queue
  rows = rows / std::max(r.groups, 1);
  if (left <= 1) return 1;
  const CostClock clock = o.load.device == "cpu" && o.load.threads == 1 ? CostClock::ThreadCpu : CostClock::Wall;
  const ForwardCostModel f = calibrate_forward_cost(model, 64, 2, clock);
  calibrated = f;
  const int64_t kv = o.kv_bytes > 0 ? kv_budget_rows(o, model.config()) : INT64_MAX;
  std::string line;
  const double extra = ranks > 1 ? o.collective_latency_us * 1e-6 : 0.0;  // the assumed latency (0 unless given)
  const int b = choose_batch(f, left, kv, rows / left, extra, line);
  if (!o.quiet) std::cerr << (r.tag + "batch " + std::to_string(b) + " (auto; " + line + ")\n");
  return b;
}

// --input on several ranks: the modelled throughput of every layout next to the chosen one (auto or --lp-size K)
// (layout_model.h), from the calibration --batch auto made (else a plain one) and the batch it chose.
void print_layouts(const GenerateOptions& o, const Ranks& r, StepModel& model, const Strategy& strategy,
                   const ForwardCostModel* calibrated, int batch) {
  const int top = strategy.max_draft_budget();
  const int plan = 1 + top + strategy.lookahead_nodes(top);
  const CostClock clock = o.load.device == "cpu" && o.load.threads == 1 ? CostClock::ThreadCpu : CostClock::Wall;
  const ForwardCostModel f = calibrated ? *calibrated : calibrate_forward_cost(model, 64, 2, clock);
  std::cerr << (r.tag + "layout auto: " +
                modelled_layouts(f, r.comm->size(), batch, plan, o.collective_latency_us * 1e-6) + "\n");
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  install_stop_handlers();  // every rank: a signal sets a flag, the request loop stops cleanly (signals.h)
  GenerateOptions o;
  if (!parse_generate_options(argc, argv, o)) return 0;  // --help
  check_generate_options(o);
  std::vector<PromptRecord> prompts = read_prompts(o);
  Ranks ranks = open_ranks(o);
  split_groups(ranks, o);  // --lp-size: a bad layout fails here, before anything is loaded
  JsonlOutput out;
  if (ranks.root) check_state_outputs(o);
  const std::vector<char> skip = open_output(o, prompts, ranks.root, out);

  const auto t0 = Clock::now();
  Models m = open_model_files(o);
  tokenize_prompts(prompts, *m.tok, *m.tokenizer_files, m.cfg, o);
  load_weights(m, o, ranks.owner);
  check_ranks_agree(*ranks.comm, *m.model, o, prompts.size());
  const RankOptions dopt = rank_options(o, ranks.tag, ranks.group);
  if (!ranks.owner) {
    serve_rank_zero(*ranks.group, *m.model, dopt.group, ranks);
    return 0;
  }
  set_strategy_identity(o, m);
  auto strategy = make_strategy(o.strategy, m.draft.get());
  if (!o.quiet) print_loaded(ranks, *m.model, *strategy, o.strategy.adaptive, seconds_since(t0));
  if (ranks.root && !o.quiet && o.from_file())
    if (const std::string line = record_gen_line(prompts); !line.empty()) std::cerr << (ranks.tag + line + "\n");
  if (!o.quiet && ranks.comm->size() > 1)
    std::cerr << (ranks.tag + "layout: " + std::to_string(ranks.comm->size()) + " ranks as " +
                  std::to_string(ranks.groups) + " group(s) of " + std::to_string(ranks.lp) + " (--lp-size " +
                  o.lp_size + (o.lp_k == 0 ? ": " + std::string(o.has_prompt ? "one --prompt" : "--input") : "") +
                  ")\n");

  RunExecutor exec = make_run_executor(*ranks.group, *m.model, dopt, o);
  Generator gen(exec.get(), *strategy, m.model->config());
  std::optional<ForwardCostModel> calibrated;  // --batch auto's calibration, reused for the layout line and drafting
  const int batch = resolve_batch(o, exec.ranks, prompts, skip, *m.model, ranks, calibrated);
  const Adaptive adaptive =
      attach_adaptive(o, *m.model, *strategy, exec, gen, batch, calibrated ? &*calibrated : nullptr);
  if (ranks.root && !o.quiet && o.from_file() && ranks.comm->size() > 1)  // auto or given: the alternatives too
    print_layouts(o, ranks, *m.model, *strategy, calibrated ? &*calibrated : nullptr, batch);
  const RequestInputs in{o, prompts, skip, *m.tok, m.cfg.eos_ids, m.model->config().max_positions, ranks.tag};
  // The request queue (job_queue.h): world rank 0 serves it and writes --output; the other groups' owners ask it.
  const QueueOptions qopt{o.rank_timeout_s, !o.stats_path.empty(), ranks.tag, o.quiet,
                          o.share_drafts == "on" && ranks.groups > 1};
  std::unique_ptr<QueueServer> server;
  std::unique_ptr<QueueClient> client;
  if (ranks.root)
    server = std::make_unique<QueueServer>(ranks.comm.get(),
                                           std::vector<int>(ranks.owners.begin() + 1, ranks.owners.end()), skip, out,
                                           qopt);
  else
    client = std::make_unique<QueueClient>(*ranks.comm, qopt);
  RequestSource& src = server ? static_cast<RequestSource&>(*server) : *client;
  if (qopt.share)  // other groups' finished requests join this group's draft state, between its steps
    src.on_share = [&strategy](const std::vector<int32_t>& seq, size_t plen) { strategy->learn(seq, plen); };
  // Without sharing, rank 0's saved state (the one writer of --trie-state, --suffix-state, --pool-state) still
  // takes in every group's requests: kept aside, learned after the loop, so no group drafts from another's.
  std::vector<std::pair<std::vector<int32_t>, size_t>> for_state;
  const bool saves_state = !o.strategy.trie.state.empty() || !o.strategy.suffix.state.empty() ||
                           !o.strategy.ouroboros.pool_state.empty();
  if (!qopt.share && server && ranks.groups > 1 && saves_state)
    src.on_share = [&for_state](const std::vector<int32_t>& seq, size_t plen) { for_state.emplace_back(seq, plen); };
  const auto learn_kept = [&] {
    for (const auto& [seq, plen] : for_state) strategy->learn(seq, plen);
    for_state.clear();
  };
  comm_set_stop_hook(&stop_signal, [&strategy] { strategy->checkpoint(); });  // a lost host: see comm.h
  LoopResult loop;
  BatchCounters bcount;
  const auto t_loop = Clock::now();
  try {
    // --kv-memory bounds the batched loop's reservations; with one request in flight it runs there too (one slot),
    // so that a request that can never fit is refused as at any other batch size, not run past the bound.
    if (batch > 1 || (o.kv_bytes > 0 && !o.has_prompt)) {
      BatchSetup bs;
      bs.opt.slots = batch;
      bs.opt.prefill_chunk = o.prefill_chunk;
      bs.opt.draft_cap = o.draft_cap == "on";
      bs.opt.kv_rows = kv_budget_rows(o, m.model->config());
      bs.cost = adaptive.cost.get();
      if (adaptive.cost)
        bs.make_controller = [&adaptive](Strategy& s) { return std::make_unique<DraftController>(s, *adaptive.cost); };
      bs.replicas = exec.par.get();  // lookahead parallelism: the slots live on every replica
      loop = run_batched_requests(in, *m.model, *strategy, bs, src, &bcount);
    } else {
      loop = run_requests(in, gen, *strategy, src);
    }
    if (server) server->drain(loop);  // the other groups' last records; then they are released
    if (client) client->finish(loop);
    comm_set_stop_hook(nullptr, nullptr);
  } catch (...) {
    comm_set_stop_hook(nullptr, nullptr);
    // A failing rank, a cut link, a dead host: keep the warm state (--trie-state, --pool-state, --suffix-state)
    // for the --resume run, as a clean stop does (run_requests saved it after every finished request already;
    // this adds what the request in flight learnt); the error itself goes on to the guard, which ends the job.
    try {
      learn_kept();
      strategy->checkpoint();
    } catch (...) {  // a state file that cannot be written must not hide the error that ended the run
    }
    throw;
  }
  // State first, then release the workers: a launcher may end the job as soon as they exit.
  learn_kept();
  strategy->checkpoint();
  exec.shutdown();
  if (!ranks.root) return 0;  // another group's owner: rank 0 reports for the job
  if (ranks.groups > 1) {     // the job's figures: every group's records, the job's wall time
    loop.total.seconds = seconds_since(t_loop);
    loop.interrupted = stop_signal() != 0 && loop.already + loop.ran + loop.refused < prompts.size();
  }
  const RunReport report{o, loop, *strategy, *ranks.comm, exec, adaptive, prompts.size(), ranks.tag,
                         ranks.groups > 1 ? nullptr : &bcount};  // several groups: rank 0's is one group's
  write_stats_file(report);
  print_summary(report);
  if (batch > 1 && !o.quiet) print_batch_summary(ranks.tag, batch, bcount, loop.refused);
  if (loop.interrupted) return report_interrupted(report);
  if (loop.refused > 0) {  // the job went on without them; say so once more at the end, and fail
    std::cerr << (ranks.tag + "error: " + std::to_string(loop.refused) +
                  " prompt(s) refused: they need more KV cache rows than --kv-memory holds\n");
    return 1;
  }
  return 0;  // one line even with --quiet: the job did not finish
}

}  // namespace la::cli
