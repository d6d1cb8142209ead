// `lookahead generate`: the flow of one run. Each stage lives in its own file:
//   generate_options  flags bound to GenerateOptions, checks before anything loads
//   prompt_input      --prompt / --input records, chat templates, token ids
//   run_setup         ranks, tokenizer and models, rank agreement, worker hand-off, strategy, adaptive drafting
//   run_executor      the executor rank 0 drives
//   request_loop      the requests in turn (streaming, records, progress, clean stop)
//   report            records, --stats-json, summary and interrupted lines
#include <chrono>
#include <vector>

#include "cli.h"
#include "lookahead/parallel/comm.h"
#include "generate_options.h"
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  install_stop_handlers();  // every rank: a signal sets a flag, the request loop stops cleanly (signals.h)
  GenerateOptions o;
  if (!parse_generate_options(argc, argv, o)) return 0;  // --help
  check_generate_options(o);
  std::vector<PromptRecord> prompts = read_prompts(o);
  Ranks ranks = open_ranks(o);
  JsonlOutput out;
  const std::vector<char> skip = open_output(o, prompts, ranks.root, out);

  const auto t0 = std::chrono::steady_clock::now();
  Models m = open_model_files(o);
  tokenize_prompts(prompts, *m.tok, m.cfg, o);
  load_weights(m, o, ranks.root);
  check_ranks_agree(*ranks.comm, *m.model, o, prompts.size());
  const RankOptions dopt = rank_options(o, ranks.tag);
  if (!ranks.root) {
    serve_rank_zero(*ranks.comm, *m.model, dopt.group, ranks);
    return 0;
  }
  set_strategy_identity(o, m);
  auto strategy = make_strategy(o.strategy, m.draft.get());
  if (!o.quiet) print_loaded(ranks, *m.model, *strategy, seconds_since(t0));

  RunExecutor exec = make_run_executor(*ranks.comm, *m.model, dopt, o);
  Generator gen(exec.get(), *strategy, m.model->config());
  const Adaptive adaptive = attach_adaptive(o, *m.model, *strategy, exec, gen);
  const RequestInputs in{o, prompts, skip, *m.tok, m.cfg.eos_ids, m.model->config().max_positions, ranks.tag};
  comm_set_stop_hook(&stop_signal, [&strategy] { strategy->checkpoint(); });  // a lost host: see comm.h
  LoopResult loop;
  try {
    loop = run_requests(in, gen, *strategy, out);
    comm_set_stop_hook(nullptr, nullptr);
  } catch (...) {
    comm_set_stop_hook(nullptr, nullptr);
    // A failing rank, a cut link, a dead host: keep the warm state (--trie-state, --pool-state, --suffix-state)
    // for the --resume run, as a clean stop does (run_requests saved it after every finished request already;
    // this adds what the request in flight learnt); the error itself goes on to the guard, which ends the job.
    try {
      strategy->checkpoint();
    } catch (...) {  // a state file that cannot be written must not hide the error that ended the run
    }
    throw;
  }
  // State first, then release the workers: a launcher may end the job as soon as they exit.
  strategy->checkpoint();
  exec.shutdown();
  const RunReport report{o, loop, *strategy, *ranks.comm, exec, adaptive, prompts.size(), ranks.tag};
  write_stats_file(report);
  print_summary(report);
  return loop.interrupted ? report_interrupted(report) : 0;  // one line even with --quiet: the job did not finish
}

}  // namespace la::cli
