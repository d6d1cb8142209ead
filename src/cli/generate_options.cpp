#include "generate_options.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "cli.h"
#include "lookahead/model/model_path.h"
#include "lookahead/options/parse.h"
#include "lookahead/options/strategy_options.h"
#include "lookahead/util/error.h"

namespace po = boost::program_options;

namespace la::cli {
namespace {

void add_run_options(po::options_description& d, GenerateOptions& o) {
  d.add_options()
      ("help,h", "show this help")
      ("config", po::value(&o.config_file), "read options from an INI-style file (key = value), flags win");
  add_model_option(d, o.load.model);
  d.add_options()
      ("tokenizer", po::value(&o.tokenizer_dir), "directory (or cached NAME) with tokenizer.model or tokenizer.json "
                                                 "(default: the model's; random: models use a byte tokenizer; `bytes`: that "
                                                 "byte tokenizer for any model)")
      ("prompt", po::value(&o.prompt), "one prompt; the text streams to stdout")
      ("input", po::value(&o.input), "JSONL file of {\"id\": ..., \"prompt\": ...} records (or \"prompt_ids\": [...] to skip the "
                                     "tokenizer, or \"messages\": [{\"role\", \"content\"}...] for a chat); a record's "
                                     "own \"max_new_tokens\", \"temperature\", \"top_k\", \"top_p\", \"seed\" or "
                                     "\"stop\" replaces the flag for it")
      ("chat", po::bool_switch(&o.chat), "wrap each prompt as one user message in the model's chat template "
                                         "(ChatML, Llama-3, Llama-2/Mistral [INST]; default: off, the text is fed as is)")
      ("chat-thinking", po::value(&o.chat_thinking), "on | off: Qwen3 chat templates' enable_thinking (off renders the "
                                                     "empty <think></think> block after the generation prompt; default: "
                                                     "the template's, on)")
      ("chat-date", po::value(&o.chat_date), "Llama-3.1+ chat templates' \"Today Date:\" line, e.g. \"26 Jul 2024\" "
                                             "(transformers' date_string; default: the template's own: its fixed date, "
                                             "or today's for templates that call strftime_now)")
      ("output", po::value(&o.output), "JSONL output, one record per prompt, written as results arrive")
      ("max-new-tokens", po::value(&o.gen.max_new_tokens)->default_value(128),
       "new tokens per prompt (0: until eos or the context limit)")
      ("temperature", po::value(&o.gen.sample.temperature)->default_value(0.f), "0: greedy; > 0: sampling")
      ("top-k", po::value(&o.gen.sample.top_k)->default_value(0), "sampling: keep the k most likely (0: off)")
      ("top-p", po::value(&o.gen.sample.top_p)->default_value(1.f), "sampling: nucleus mass in (0, 1] (1: off)")
      ("seed", po::value(&o.seed)->default_value(0), "sampling seed (outputs are reproducible)")
      ("stop", po::value(&o.stop)->composing(),
       "stop sequence (repeatable): a request ends at the first token whose text completes one (finish_reason "
       "\"stop\"; its ids and text end with that token); e.g. --stop $'\\n\\n'");
  add_dtype_device_options(d, o.load);
  d.add_options()
      ("stats-json", po::value(&o.stats_path), "write per-prompt and aggregate statistics to this JSON file")
      ("comm", po::value(&o.comm)->default_value("auto"),
       "multi-rank runs (mpirun/srun): auto | mpi | nccl (auto: NCCL when every rank has its own GPU)")
      ("rank-timeout", po::value(&o.rank_timeout_s)->default_value(60),
       "multi-rank runs: seconds rank 0 waits for a silent rank before failing the job (0: forever)")
      ("lp-size", po::value(&o.lp_size)->default_value("auto"),
       "multi-rank runs: ranks per lookahead-parallel group; the job's ranks form ranks/K groups that take "
       "--input requests from a queue on rank 0 (K = 1: every rank decodes, and batches, requests of its own). "
       "auto: one group of all ranks for --prompt, groups of 1 for --input (the layout is printed at start)")
      ("share-drafts", po::value(&o.share_drafts)->default_value("on"),
       "--lp-size with several groups: on | off. on: every finished request's tokens reach every group's draft "
       "state (trie, suffix tree) between steps, so each group drafts from what all have generated")
      ("simulate-ranks", po::value(&o.simulate_ranks)->default_value(0),
       "lookahead parallelism simulated in one process: split every step over K replicas (shared weights, own "
       "KV caches), run them in sequence, time each; --stats-json gets a \"simulation\" object (0: off)")
      ("collective-latency-us", po::value(&o.collective_latency_us)->default_value(0),
       "--simulate-ranks: per-step collective latency (us) added to the slowest replica's forward in the model "
       "of a K-device step (launch/strong-scaling.sh measures it)")
      ("batch", po::value(&o.batch)->default_value("auto"),
       "--input: requests in flight, every step one forward over all of them (continuous batching); each "
       "request's tokens are those of decoding it alone. Under lookahead parallelism (a group of K > 1 ranks or "
       "--simulate-ranks K) every rank holds every request's cache and each step's plans are split across the "
       "ranks. auto: from the measured step costs (printed at start; 1 under lookahead parallelism); "
       "1: one request at a time")
      ("prefill-chunk", po::value(&o.prefill_chunk)->default_value(256),
       "--batch: prompt tokens a joining request feeds per step, between the other requests' decode steps")
      ("draft-cap", po::value(&o.draft_cap)->default_value("on"),
       "on | off: --batch with adaptive drafting: cap every request's draft budget each step at the cap (1, 2, 4 "
       "tokens or none) whose steps returned the most tokens per second so far, measured per number of requests "
       "decoding (off: each request's budget is its controller's choice alone)")
      ("kv-memory", po::value(&o.kv_memory),
       "--batch: KV cache bytes all requests in flight may reserve (suffix K, M or G; default: requests in "
       "flight x the context); a request that does not fit waits, one that never can is refused")
      ("quiet,q", po::bool_switch(&o.quiet), "do not stream text or print the summary")
      ("allow-empty-prompt", po::bool_switch(&o.allow_empty), "accept empty prompts (generation starts from BOS)");
}

// --strategy, --draft-seed and the registry's flags (lookahead/options/strategy_options.h), then --adaptive.
void add_generate_strategy_options(po::options_description& d, StrategyOptions& s) {
  add_strategy_options(d, s);
  d.add_options()
      ("adaptive", po::value<std::string>()->default_value("on")->notifier([&s](const std::string& v) {
         LA_CHECK(v == "on" || v == "off", "invalid --adaptive '", v, "' (expected on or off)");
         s.adaptive = v == "on";
       }),
       "on | off: choose each step's draft size (0 = plain step) from a cost model calibrated at load and measured "
       "acceptance; the strategy's parameters are upper bounds");
}

// --help's list of strategies, from the registry.
std::string strategies_help() {
  std::string h = "\nStrategies (--strategy):\n";
  for (const auto& e : strategy_registry()) {
    std::string n = e.name;
    n.resize(std::max<size_t>(n.size() + 2, 16), ' ');
    h += "  " + n + e.help + "\n";
  }
  return h;
}

void check_inputs(const GenerateOptions& o) {
  LA_CHECK(o.has_prompt || !o.input.empty(), "give --prompt TEXT or --input prompts.jsonl");
  LA_CHECK(!(o.has_prompt && !o.input.empty()), "give only one of --prompt and --input");
  LA_CHECK(o.input.empty() || !o.output.empty(), "--input needs --output");
}

void check_sampling(const GenParams& g, int64_t seed) {
  LA_CHECK(g.max_new_tokens >= 0, "--max-new-tokens must be >= 0 (got ", g.max_new_tokens, ")");
  LA_CHECK(std::isfinite(g.sample.temperature) && g.sample.temperature >= 0,
           "--temperature must be >= 0 (got ", g.sample.temperature, ")");
  LA_CHECK(g.sample.top_k >= 0, "--top-k must be >= 0 (got ", g.sample.top_k, ")");
  LA_CHECK(g.sample.top_p > 0 && g.sample.top_p <= 1, "--top-p must be in (0, 1] (got ", g.sample.top_p, ")");
  LA_CHECK(seed >= 0, "--seed must be >= 0");
}

// "512M", "2G", "1048576" -> bytes (binary suffixes).
int64_t parse_bytes(const std::string& s, const char* flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    fail("invalid ", flag, " '", s, "' (expected bytes, e.g. 512M or 2G)");
  }
  const std::string unit = s.substr(used);
  double mult = 1;
  if (unit == "K" || unit == "k" || unit == "KiB") mult = 1024.0;
  else if (unit == "M" || unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else LA_CHECK(unit.empty(), "invalid ", flag, " '", s, "' (expected bytes, e.g. 512M or 2G)");
  LA_CHECK(std::isfinite(v) && v > 0 && v * mult < 9e18, "invalid ", flag, " '", s, "' (must be > 0)");
  return static_cast<int64_t>(v * mult);
}

void check_batch(GenerateOptions& o) {
  if (o.batch == "auto") {
    o.batch_size = 0;
  } else {
    size_t used = 0;
    int b = 0;
    try {
      b = std::stoi(o.batch, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    LA_CHECK(used == o.batch.size() && used > 0 && b >= 1 && b <= 1024, "invalid --batch '", o.batch,
             "' (expected auto or a number in [1, 1024])");
    o.batch_size = b;
  }
  LA_CHECK(o.prefill_chunk >= 1 && o.prefill_chunk <= 65536, "--prefill-chunk must be in [1, 65536] (got ",
           o.prefill_chunk, ")");
  o.kv_bytes = o.kv_memory.empty() ? 0 : parse_bytes(o.kv_memory, "--kv-memory");
}

void check_ranks(GenerateOptions& o) {
  LA_CHECK(o.rank_timeout_s >= 0, "--rank-timeout must be >= 0");
  LA_CHECK(o.draft_cap == "on" || o.draft_cap == "off", "invalid --draft-cap '", o.draft_cap,
           "' (expected on or off)");
  LA_CHECK(o.share_drafts == "on" || o.share_drafts == "off", "invalid --share-drafts '", o.share_drafts,
           "' (expected on or off)");
  if (o.lp_size == "auto") {
    o.lp_k = 0;
  } else {
    size_t used = 0;
    int k = 0;
    try {
      k = std::stoi(o.lp_size, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    LA_CHECK(used == o.lp_size.size() && used > 0 && k >= 1 && k <= 65536, "invalid --lp-size '", o.lp_size,
             "' (expected auto or a number of ranks >= 1)");
    o.lp_k = k;
  }
  LA_CHECK(o.simulate_ranks >= 0, "--simulate-ranks must be >= 1 (or 0: off; got ", o.simulate_ranks, ")");
  LA_CHECK(std::isfinite(o.collective_latency_us) && o.collective_latency_us >= 0,
           "--collective-latency-us must be >= 0");
}

}  // namespace

void add_generate_options(po::options_description& d, GenerateOptions& o) {
  add_run_options(d, o);
  add_device_options(d, o.load, o.graphs);
  add_generate_strategy_options(d, o.strategy);
  add_job_options(d, o.job);
}

bool parse_generate_options(int argc, char** argv, GenerateOptions& o) {
  po::options_description d("lookahead generate: decode prompts with a Llama-family model\n\nOptions");
  add_generate_options(d, o);
  po::variables_map vm;
  if (!parse_checked(argc, argv, d, vm, "config")) {  // --help
    std::cout << d << strategies_help() << "\nExamples:\n  lookahead generate --model ../shared/models/stories260K --prompt 'Once upon a time'"
                      " --strategy lade\n  lookahead generate --model DIR --input prompts.jsonl --output out.jsonl"
                      " --strategy trie --decoding-length 64\n" << kJobHelp;
    return false;
  }
  o.has_prompt = vm.count("prompt") > 0;
  return true;
}

void check_generate_options(GenerateOptions& o) {
  check_load_options(o.load, o.graphs);  // --model first: the one error a run without flags gets
  if (!o.tokenizer_dir.empty() && o.tokenizer_dir != "bytes")
    o.tokenizer_dir = resolve_model_path(o.tokenizer_dir, "--tokenizer");
  if (!o.strategy.ouroboros.draft_model.empty())
    o.strategy.ouroboros.draft_model = resolve_model_path(o.strategy.ouroboros.draft_model, "--draft-model");
  check_inputs(o);
  LA_CHECK(o.chat_thinking.empty() || o.chat_thinking == "on" || o.chat_thinking == "off", "invalid --chat-thinking '",
           o.chat_thinking, "' (expected on or off)");
  LA_CHECK(o.chat_date.find_first_of("\n\r") == std::string::npos, "--chat-date must be one line");
  check_sampling(o.gen, o.seed);
  for (const auto& s : o.stop)
    LA_CHECK(!s.empty(), "--stop must not be empty (an empty sequence would end every request at once)");
  o.gen.sample.seed = static_cast<uint64_t>(o.seed);
  o.strategy.validate();
  o.job.validate();
  check_ranks(o);
  check_batch(o);
}

}  // namespace la::cli
