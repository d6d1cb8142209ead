#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "batch.h"
#include "cli.h"
#include "progress.h"
#include "signals.h"
#include "lookahead/decode/cost_calibration.h"
#include "lookahead/decode/draft_controller.h"
#include "lookahead/decode/executor.h"
#include "lookahead/decode/generator.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/model/chat_template.h"
#include "lookahead/model/llama.h"
#include "lookahead/model/model_path.h"
#include "lookahead/model/tokenizer.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "lookahead/util/prompt_records.h"
#include "lookahead/parallel/agreement.h"
#include "lookahead/parallel/parallel_executor.h"
#include "lookahead/parallel/worker.h"

namespace po = boost::program_options;
using json = nlohmann::json;

namespace la::cli {
namespace {

using Prompt = PromptRecord;

// Token ids of a rendered chat, as transformers' apply_chat_template(tokenize=True) makes them: the template
// writes any BOS itself, so the tokenizer must not add one (no encode flag for that: drop the one it adds).
std::vector<int32_t> encode_chat(const Tokenizer& tok, const std::string& text, int bos_id) {
  std::vector<int32_t> ids = tok.encode(text);
  const std::vector<int32_t> empty = tok.encode("");
  if (!empty.empty() && empty[0] == bos_id && !ids.empty() && ids[0] == bos_id) ids.erase(ids.begin());
  return ids;
}

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

// Adaptive drafting: steps per chosen draft budget, plain-step fallbacks, probes.
json adaptive_json(const AdaptiveCounters& a) {
  json h = json::object();
  for (auto& [b, n] : a.budget_hist) h[std::to_string(b)] = n;
  return {{"budget_hist", h}, {"steps", a.steps}, {"plain_steps", a.plain_steps},
          {"plain_fraction", a.steps ? double(a.plain_steps) / a.steps : 0.0}, {"probe_steps", a.probe_steps}};
}

void add_strategy_options(po::options_description& d, StrategyOptions& s) {
  d.add_options()
      ("strategy", po::value(&s.name)->default_value("ar"),
       "ar | jacobi | lade | trie | prompt-lookup | ouroboros")
      ("draft-seed", po::value(&s.seed)->default_value(0), "seed of draft-state randomness (LADE/Jacobi init)")
      ("jacobi-block", po::value(&s.jacobi_block)->default_value(16), "jacobi: guessed future tokens per step")
      ("window", po::value(&s.window)->default_value(15), "lade: window W (lookahead columns)")
      ("ngram", po::value(&s.ngram)->default_value(5), "lade: n-gram size N (N-1 window levels)")
      ("guesses", po::value(&s.guesses)->default_value(15), "lade: G, max verification n-grams per step and per key")
      ("pool-from-prompt", po::bool_switch(&s.pool_from_prompt), "lade: seed the n-gram pool with prompt n-grams")
      ("decoding-length", po::value(&s.decoding_length)->default_value(64), "trie: draft tokens per step")
      ("branch-length", po::value(&s.branch_length)->default_value(12), "trie: branch length")
      ("trie-capacity", po::value(&s.trie_capacity)->default_value(0), "trie: node budget (0: 32 x decoding length)")
      ("trie-mode", po::value(&s.trie_mode)->default_value("hierarchical"), "trie: hierarchical | parallel")
      ("trie-state", po::value(&s.trie_state)->default_value(""), "trie: state file loaded at start, saved at exit")
      ("pl-min-ngram", po::value(&s.pl_min_ngram)->default_value(1), "prompt-lookup: shortest suffix to match")
      ("pl-max-ngram", po::value(&s.pl_max_ngram)->default_value(4), "prompt-lookup: longest suffix to match")
      ("pl-num-tokens", po::value(&s.pl_num_tokens)->default_value(10), "prompt-lookup: tokens proposed per step")
      ("draft-model", po::value(&s.draft_model)->default_value(""), "ouroboros: draft model directory or random:")
      ("gamma", po::value(&s.gamma)->default_value(12), "ouroboros: draft tokens per round")
      ("draft-window", po::value(&s.draft_window)->default_value(20), "ouroboros: draft model's LADE window")
      ("draft-guesses", po::value(&s.draft_guesses)->default_value(20), "ouroboros: draft model's LADE guesses")
      ("draft-ngram", po::value(&s.draft_ngram)->default_value(7), "ouroboros: draft model's LADE n-gram size")
      ("extensions", po::value(&s.extensions)->default_value(3), "ouroboros: K phrase extensions verified per step")
      ("pool-state", po::value(&s.pool_state)->default_value(""), "ouroboros: phrase pool file loaded/saved")
      ("adaptive", po::value<std::string>()->default_value("on")->notifier([&s](const std::string& v) {
         LA_CHECK(v == "on" || v == "off", "invalid --adaptive '", v, "' (expected on or off)");
         s.adaptive = v == "on";
       }),
       "on | off: choose each step's draft size (0 = plain step) from a cost model calibrated at load and measured "
       "acceptance; the strategy's parameters are upper bounds");
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  install_stop_handlers();  // every rank: a signal sets a flag, the loop below stops cleanly (signals.h)
  BatchOptions bo;
  LoadOptions lo;
  StrategyOptions so;
  GenParams gp;
  std::string prompt, input, output, stats_path, config_file, tokenizer_dir, draft_device;
  bool quiet = false, allow_empty = false, chat = false;
  std::string comm_kind = "auto";
  double rank_timeout = 60;
  int64_t seed = 0;
  int simulate_ranks = 0;
  double collective_latency_us = 0;
  po::options_description d("lookahead generate: decode prompts with a Llama-family model\n\nOptions");
  d.add_options()
      ("help,h", "show this help")
      ("config", po::value(&config_file), "read options from an INI-style file (key = value), flags win")
      ("model", po::value(&lo.model), "Hugging Face model directory, a NAME under $LOOKAHEAD_DEPS/models "
                                      "(default ~/.cache/lookahead/models; e.g. SmolLM2-135M-Instruct), or "
                                      "random:NAME[:SEED] (dummy weights)")
      ("tokenizer", po::value(&tokenizer_dir), "directory (or cached NAME) with tokenizer.model or tokenizer.json "
                                               "(default: the model's; random: models use a byte tokenizer; `bytes`: that "
                                               "byte tokenizer for any model)")
      ("prompt", po::value(&prompt), "one prompt; the text streams to stdout")
      ("input", po::value(&input), "JSONL file of {\"id\": ..., \"prompt\": ...} records (or \"prompt_ids\": [...] to skip the "
                                   "tokenizer, or \"messages\": [{\"role\", \"content\"}...] for a chat)")
      ("chat", po::bool_switch(&chat), "wrap each prompt as one user message in the model's chat template "
                                       "(ChatML, Llama-3, Llama-2/Mistral [INST]; default: off, the text is fed as is)")
      ("output", po::value(&output), "JSONL output, one record per prompt, written as results arrive")
      ("max-new-tokens", po::value(&gp.max_new_tokens)->default_value(128),
       "new tokens per prompt (0: until eos or the context limit)")
      ("temperature", po::value(&gp.sample.temperature)->default_value(0.f), "0: greedy; > 0: sampling")
      ("top-k", po::value(&gp.sample.top_k)->default_value(0), "sampling: keep the k most likely (0: off)")
      ("top-p", po::value(&gp.sample.top_p)->default_value(1.f), "sampling: nucleus mass in (0, 1] (1: off)")
      ("seed", po::value(&seed)->default_value(0), "sampling seed (outputs are reproducible)")
      ("dtype", po::value(&lo.dtype)->default_value("fp32"), "fp32 | fp16 | bf16")
      ("device", po::value(&lo.device)->default_value("cpu"), "cpu | cuda")
      ("threads", po::value(&lo.threads)->default_value(0), "CPU threads (0: libtorch default)")
      ("stats-json", po::value(&stats_path), "write per-prompt and aggregate statistics to this JSON file")
      ("comm", po::value(&comm_kind)->default_value("auto"),
       "multi-rank runs (mpirun/srun): auto | mpi | nccl (auto: NCCL when every rank has its own GPU)")
      ("rank-timeout", po::value(&rank_timeout)->default_value(60),
       "multi-rank runs: seconds rank 0 waits for a silent rank before failing the job (0: forever)")
      ("simulate-ranks", po::value(&simulate_ranks)->default_value(0),
       "lookahead parallelism simulated in one process: split every step over K replicas (shared weights, own "
       "KV caches), run them in sequence, time each; --stats-json gets a \"simulation\" object (0: off)")
      ("collective-latency-us", po::value(&collective_latency_us)->default_value(0),
       "--simulate-ranks: per-step collective latency (us) added to the slowest replica's forward in the model "
       "of a K-device step (launch/strong-scaling.sh measures it)")
      ("quiet,q", po::bool_switch(&quiet), "do not stream text or print the summary")
      ("allow-empty-prompt", po::bool_switch(&allow_empty), "accept empty prompts (generation starts from BOS)");
  std::string graphs;
  add_device_options(d, lo, graphs);
  add_strategy_options(d, so);
  add_batch_options(d, bo);
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, d), vm);
  if (vm.count("help")) {
    std::cout << d << "\nExamples:\n  lookahead generate --model ../shared/models/stories260K --prompt 'Once upon a time'"
                      " --strategy lade\n  lookahead generate --model DIR --input prompts.jsonl --output out.jsonl"
                      " --strategy trie --decoding-length 64\n" << kBatchHelp;
    return 0;
  }
  if (vm.count("config")) {
    const std::string cf = vm["config"].as<std::string>();
    LA_CHECK(file_exists(cf), "--config file '", cf, "' does not exist");
    po::store(po::parse_config_file<char>(cf.c_str(), d), vm);
  }
  po::notify(vm);

  // ---- validate everything before loading anything ----
  LA_CHECK(!lo.model.empty(), "--model is required");
  lo.model = resolve_model_path(lo.model, "--model");
  if (!tokenizer_dir.empty() && tokenizer_dir != "bytes") tokenizer_dir = resolve_model_path(tokenizer_dir, "--tokenizer");
  if (!so.draft_model.empty()) so.draft_model = resolve_model_path(so.draft_model, "--draft-model");
  LA_CHECK(vm.count("prompt") || !input.empty(), "give --prompt TEXT or --input prompts.jsonl");
  LA_CHECK(!(vm.count("prompt") && !input.empty()), "give only one of --prompt and --input");
  LA_CHECK(input.empty() || !output.empty(), "--input needs --output");
  LA_CHECK(gp.max_new_tokens >= 0, "--max-new-tokens must be >= 0 (got ", gp.max_new_tokens, ")");
  LA_CHECK(std::isfinite(gp.sample.temperature) && gp.sample.temperature >= 0,
           "--temperature must be >= 0 (got ", gp.sample.temperature, ")");
  LA_CHECK(gp.sample.top_k >= 0, "--top-k must be >= 0 (got ", gp.sample.top_k, ")");
  LA_CHECK(gp.sample.top_p > 0 && gp.sample.top_p <= 1, "--top-p must be in (0, 1] (got ", gp.sample.top_p, ")");
  LA_CHECK(seed >= 0, "--seed must be >= 0");
  gp.sample.seed = static_cast<uint64_t>(seed);
  LA_CHECK(lo.dtype == "fp32" || lo.dtype == "fp16" || lo.dtype == "bf16", "invalid --dtype '", lo.dtype,
           "' (expected fp32, fp16 or bf16)");
  LA_CHECK(lo.device == "cpu" || lo.device == "cuda", "invalid --device '", lo.device, "' (expected cpu or cuda)");
  LA_CHECK(lo.threads >= 0, "--threads must be >= 0");
  apply_device_options(lo, graphs);
  so.validate();
  bo.validate();

  std::vector<Prompt> prompts;
  if (vm.count("prompt")) {
    prompts.push_back({json(), prompt, {}});
  } else {
    LA_CHECK(file_exists(input), "--input file '", input, "' does not exist");
    std::ifstream in(input);
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      Prompt p;
      if (!parse_prompt_record(line, prompts.size(), input + ":" + std::to_string(lineno), p)) continue;
      prompts.push_back(std::move(p));
    }
    LA_CHECK(!prompts.empty(), "--input file '", input, "' holds no prompts");
  }
  LA_CHECK(rank_timeout >= 0, "--rank-timeout must be >= 0");
  LA_CHECK(simulate_ranks >= 0, "--simulate-ranks must be >= 1 (or 0: off; got ", simulate_ranks, ")");
  LA_CHECK(std::isfinite(collective_latency_us) && collective_latency_us >= 0,
           "--collective-latency-us must be >= 0");
  auto comm = make_comm(comm_kind, lo.device);
  LA_CHECK(simulate_ranks == 0 || comm->size() == 1, "--simulate-ranks runs in one process; this job has ",
           comm->size(), " ranks (launch it without mpirun/srun)");
  const bool root = comm->rank() == 0;
  const bool rank_log = !quiet;  // per-rank log lines (load, device) carry the rank in multi-rank jobs
  const std::string tag = comm->size() > 1 ? "[rank " + std::to_string(comm->rank()) + "] " : "[lookahead] ";
  if (!root) quiet = true;        // only rank 0 streams text and writes outputs
  if (comm->size() > 1 && lo.device == "cuda") lo.device_index = rank_cuda_device(comm->local_rank());
  JsonlOutput out;  // refuses to clobber a non-empty file unless --overwrite; --resume reads what is there
  if (!output.empty() && root) out = JsonlOutput(output, bo.output_mode());
  std::vector<char> skip(prompts.size(), 0);
  if (out.is_open() && bo.resume) {
    std::vector<json> ids;
    std::vector<std::string> texts;
    for (const auto& p : prompts) ids.push_back(p.id), texts.push_back(p.text);
    skip = resumed_prompts(out, output, ids, texts);
  }

  // ---- load ----
  auto t0 = std::chrono::steady_clock::now();
  const ModelConfig cfg0 = model_config_of(lo.model);  // fails fast on bad config before weights
  const std::unique_ptr<Tokenizer> tok = open_tokenizer(lo.model, tokenizer_dir, &cfg0);  // as `tokenize` does
  const bool from_file = !vm.count("prompt");
  std::unique_ptr<ChatTemplate> chat_tmpl;
  const bool any_messages = std::any_of(prompts.begin(), prompts.end(), [](const Prompt& p) {
    return !p.messages.empty() && p.ids.empty();
  });
  if (chat || any_messages) {
    const std::string tdir = tokenizer_dir.empty() ? lo.model : tokenizer_dir;
    LA_CHECK(!is_random_model(tdir), chat ? "--chat needs" : "\"messages\" records need",
             " a chat template: give a model directory (or --tokenizer DIR) that has one");
    chat_tmpl = std::make_unique<ChatTemplate>(ChatTemplate::load(tdir));
  }
  for (auto& p : prompts) {
    if (!p.ids.empty()) {  // pre-tokenized ("prompt_ids"): used as given
      for (auto t : p.ids)
        LA_CHECK(t >= 0 && t < cfg0.vocab, "prompt ", p.id.dump(), ": token id ", t, " outside the vocabulary");
      check_fits(cfg0, p.ids.size(), gp.max_new_tokens);
      continue;
    }
    LA_CHECK(allow_empty || !p.text.empty() || !p.messages.empty(), "empty prompt",
             from_file ? " (id " + p.id.dump() + ")" : std::string(),
             " (pass --allow-empty-prompt to generate from BOS alone)");
    if (!p.messages.empty()) p.ids = encode_chat(*tok, chat_tmpl->render(p.messages), cfg0.bos_id);
    else if (chat) p.ids = encode_chat(*tok, chat_tmpl->render({{"user", p.text}}), cfg0.bos_id);
    else p.ids = tok->encode(p.text);
    LA_CHECK(!p.ids.empty(), "empty prompt", from_file ? " (id " + p.id.dump() + ")" : std::string(),
             ": it encodes to no tokens");
    try {
      check_fits(cfg0, p.ids.size(), gp.max_new_tokens);
    } catch (const Error& e) {
      fail(from_file ? "prompt " + p.id.dump() + ": " : std::string(), e.what());
    }
  }
  auto model = load_llama(lo);
  std::unique_ptr<StepModel> draft;
  if (so.name == "ouroboros") {
    LoadOptions dl = lo;
    dl.model = so.draft_model;
    const ModelConfig dc = model_config_of(dl.model);
    LA_CHECK(dc.vocab == cfg0.vocab, "draft model vocabulary (", dc.vocab, ") differs from the target's (", cfg0.vocab,
             "): they must share a tokenizer");
    // Both tokenizer files, where they exist, must be byte-identical.
    for (const char* f : {"/tokenizer.model", "/tokenizer.json"}) {
      const std::string ttok = (tokenizer_dir.empty() ? lo.model : tokenizer_dir) + f;
      const std::string dtok = dl.model + f;
      if (file_exists(ttok) && file_exists(dtok))
        LA_CHECK(read_file(ttok) == read_file(dtok), "draft model tokenizer differs from the target's (", dtok,
                 " vs ", ttok, ")");
    }
    // Only rank 0 runs the strategy, so only rank 0 needs the draft weights.
    if (root) draft = load_llama(dl);
  }
  // Every rank must hold the same weights and run with the same parameters.
  {
    std::ostringstream params;
    params << lo.dtype << "|" << gp.max_new_tokens << "|" << gp.sample.temperature << "|" << gp.sample.top_k << "|"
           << gp.sample.top_p << "|" << gp.sample.seed << "|" << so.name << "|" << prompts.size();
    if (comm->size() > 1) check_agreement(*comm, model->checksum(), params.str());  // one rank: nothing to compare
  }
  CommGroupOptions gopt;
  gopt.rank_timeout_s = rank_timeout;
  gopt.stop_signal = &stop_signal_flag();  // a worker reports its own signal; rank 0 then stops the job cleanly
  ParallelOptions dopt;
  dopt.collective_latency_s = collective_latency_us * 1e-6;
  dopt.record_limit = simulate_ranks > 0 ? 20000 : 0;  // the simulation's per-step table (short runs only)
  dopt.on_worker_stop = [&tag](int sig, int r) {
    if (stop_signal() == 0) std::cerr << (tag + "rank " + std::to_string(r) + " received " + signal_name(sig) + "\n");
    request_stop(sig);
  };
  if (!root) {
    if (rank_log)  // one write per line, so ranks' lines do not interleave
      std::cerr << (tag + "model " + model->describe() + " loaded; serving rank 0 (" +
                    std::to_string(comm->size()) + " ranks, " + comm->backend() + ")\n");
    LocalExecutor wexec(*model);
    run_worker(*comm, wexec, gopt);
    return 0;
  }
  auto strategy = make_strategy(so, draft.get());
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet) {
    std::ostringstream line;
    line << tag << "model " << model->describe() << " loaded in " << std::fixed << std::setprecision(2) << load_s
         << " s; strategy " << strategy->name();
    if (comm->size() > 1) line << "; " << comm->size() << " ranks, " << comm->backend();
    std::cerr << line.str() + "\n";
  }

  LocalExecutor lexec(*model);
  // One rank: lexec itself; else the parallel executor over the ranks or the simulated ones.
  auto par = make_parallel_executor(*comm, lexec, simulate_ranks, gopt, dopt);
  ParallelExecutor* sim = par && par->simulated() ? par.get() : nullptr;
  StepExecutor& exec = par ? static_cast<StepExecutor&>(*par) : lexec;
  Generator gen(exec, *strategy, model->config());
  // Adaptive drafting: a forward cost model calibrated here and kept current by the executor, on its rank count.
  std::unique_ptr<StepCostModel> cost;
  std::unique_ptr<DraftController> controller;
  if (so.adaptive && strategy->max_draft_budget() > 0) {
    const int top = strategy->max_draft_budget();
    cost = std::make_unique<StepCostModel>(calibrate_forward_cost(*model, 1 + top + strategy->lookahead_nodes(top)),
                                           sim ? simulate_ranks : comm->size(), collective_latency_us * 1e-6);
    exec.set_cost_model(cost.get());
    controller = std::make_unique<DraftController>(*strategy, *cost);
    gen.set_controller(controller.get());
  }
  RequestStats total;
  json per = json::array();
  // Batch machinery (batch.h): --resume skips, progress, clean stop on SIGINT/SIGTERM, memory lines.
  size_t already = 0, ran = 0;
  for (char k : skip) already += k;
  Progress progress(prompts.size(), already, bo.progress_interval, !quiet && from_file, tag);
  StopControl stop(bo.stop_grace);
  gp.cancel = stop.cancel_flag();
  bool interrupted = false;
  if (bo.rss_every > 0) std::cerr << memory_line(tag, 0, strategy->counters()) + "\n";
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (skip[i]) continue;
    if (stop_signal() != 0) {
      interrupted = true;
      break;
    }
    const auto& p = prompts[i];
    gp.sample.stream = i;  // the prompt's index, not the count processed: resumed sampled runs match
    stop.begin_request(gp.max_new_tokens > 0 ? gp.max_new_tokens : model->config().max_positions + 1 -
                                                                        static_cast<int>(p.ids.size()));
    const bool stream = vm.count("prompt") && !quiet;
    // The eos that ends generation prints nothing; other special tokens print as their text.
    TextStream ts(*tok, p.ids, cfg0.eos_ids);
    if (stream) {  // a chat shows the user's text on its own line, not the template around it
      std::cout << p.text << (chat ? "\n" : "") << std::flush;
    }
    auto cb = [&](const std::vector<int32_t>& ids) {
      if (stream) std::cout << ts.push(ids) << std::flush;
      if (stop.on_step(static_cast<int>(ids.size()))) strategy->shutdown();  // save state now, again at the end
      progress.step(static_cast<int>(ids.size()));
    };
    GenResult r = gen.generate(p.ids, gp, cb);
    if (stream) std::cout << ts.finish() << std::endl;
    if (r.stats.finish_reason == "cancelled") {  // dropped, never written: --resume redoes it
      interrupted = true;
      break;
    }
    total.add(r.stats);
    // "text": exactly what streaming prints for these ids.
    TextStream whole(*tok, p.ids, cfg0.eos_ids);
    const std::string text = whole.push(r.ids) + whole.finish();
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
                {"strategy", strategy->name()},
                {"stats", stats_json(r.stats)}};
    if (!p.messages.empty()) {
      json m = json::array();
      for (const auto& x : p.messages) m.push_back({{"role", x.role}, {"content", x.content}});
      rec["messages"] = m;
    }
    if (r.stats.adaptive) rec["stats"]["adaptive"] = adaptive_json(r.stats.budgets);
    if (out.is_open()) out.write(rec);
    if (!stats_path.empty()) {  // kept only for --stats-json (about 1 KB per prompt)
      per.push_back(rec["stats"]);
      per.back()["id"] = p.id;
    }
    ++ran;
    progress.request_done(r.stats.new_tokens);
    if (bo.rss_every > 0 && ran % bo.rss_every == 0)
      std::cerr << memory_line(tag, ran, strategy->counters()) + "\n";
  }
  progress.finish();
  // State first, then release the workers: a launcher may end the job as soon as they exit.
  strategy->shutdown();
  if (par) par->shutdown();
  if (!stats_path.empty()) {
    json s = {{"strategy", strategy->name()}, {"model", lo.model}, {"aggregate", stats_json(total)},
              {"per_prompt", per}, {"counters", strategy->counters()}};
    if (controller) {
      s["adaptive"] = adaptive_json(total.budgets);
      json cm = json::object();
      for (int b : cost->forward().buckets()) cm[std::to_string(b)] = cost->forward().seconds(b) * 1e3;
      s["adaptive"]["forward_ms_by_tokens"] = cm;
      s["adaptive"]["ladder"] = controller->ladder();
    }
    const auto dc = par ? par->counters() : ParallelCounters{};
    s["ranks"] = comm->size();
    // Which communicator served the run and whether MPI_Init ever ran (a hand-started process must not need MPI).
    s["comm"] = {{"backend", comm->backend()}, {"mpi_initialized", mpi_initialized()}, {"mpi_build", built_with_mpi()}};
    if (par && !sim)
      s["dist"] = {{"backend", dc.backend}, {"steps", dc.steps},
                   {"duplication", dc.plan_nodes ? double(dc.part_nodes) / dc.plan_nodes : 0.0},
                   {"disagreements", 0}, {"step_tokens", dc.step_tokens},
                   {"run_s", dc.run_seconds},
                   {"max_forward_s", dc.max_forward_seconds}, {"forward_rank0_s", dc.forward_seconds_rank0},
                   {"broadcast_s", dc.broadcast_seconds}, {"gather_wait_s", dc.gather_wait_seconds},
                   {"bytes_sent", dc.bytes_sent}, {"bytes_received", dc.bytes_received}};
    if (sim) {
      const auto c = sim->counters();
      const double steps = c.steps ? double(c.steps) : 1.0, modelled = sim->modelled_seconds(total.seconds);
      json fwd = json::array(), tok = json::array();
      for (const auto& r : sim->steps()) {  // per step and rank; none when large (ParallelOptions::record_limit)
        json f = json::array();
        for (float x : r.forward_ms) f.push_back(std::round(x * 1000) / 1000);
        fwd.push_back(f);
        tok.push_back(r.step_tokens);
      }
      s["simulation"] = {
          {"ranks", c.ranks}, {"steps", c.steps}, {"new_tokens", total.new_tokens},
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
    write_file_atomic(stats_path, s.dump(2));
  }
  if (!quiet) {
    std::cerr << std::fixed << tag << ran << " prompt(s), " << total.new_tokens << " tokens in "
              << total.steps << " steps (S = " << std::setprecision(2) << total.compression() << "), "
              << std::setprecision(3) << total.seconds << " s, " << std::setprecision(1) << total.tokens_per_s()
              << " tokens/s\n";
    if (sim) {
      const double m = sim->modelled_seconds(total.seconds);
      std::cerr << "[lookahead] simulated " << simulate_ranks << " ranks in sequence; modelled " << simulate_ranks
                << "-device run (slowest replica + " << std::setprecision(1) << collective_latency_us
                << " us per step): " << std::setprecision(3) << m << " s, " << std::setprecision(1)
                << (m > 0 ? total.new_tokens / m : 0.0) << " tokens/s\n";
    }
  }
  if (interrupted) {  // one line even with --quiet: the job did not finish
    const int sig = stop_signal();
    const size_t written = ran;
    std::cerr << (tag + "interrupted by " + signal_name(sig) + ": " + std::to_string(already + written) + " of " +
                  std::to_string(prompts.size()) + " prompt(s) done" +
                  (output.empty() ? std::string() : " in '" + output + "'; rerun with --resume to continue") +
                  (stop.cancelled() ? " (the request in flight was dropped)" : "") + "\n");
    return interrupted_exit_code(sig);
  }
  return 0;
}

}  // namespace la::cli
