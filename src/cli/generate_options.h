// `lookahead generate`'s flags, bound to one options struct (Boost.Program_options), and the checks that need
// nothing loaded. Each strategy checks its own flags (StrategyOptions::validate -> validate_*_options next to the
// strategy in src/decode/); long-job flags are checked by JobOptions (job_options.h).
#pragma once
#include <boost/program_options.hpp>
#include <cstdint>
#include <string>

#include "job_options.h"
#include "lookahead/decode/generator.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/engine/llama.h"

namespace la::cli {

struct GenerateOptions {
  LoadOptions load;          // --model --dtype --device --threads --kernels (--cuda-graphs via `graphs`)
  StrategyOptions strategy;  // --strategy and its parameters, --adaptive
  GenParams gen;             // --max-new-tokens, sampling (the seed arrives through `seed`)
  std::vector<std::string> stop;  // --stop: stop sequences (text), each request's unless its record has "stop"
  JobOptions job;            // --resume --overwrite --progress-interval --stop-grace --rss-every
  std::string prompt;        // --prompt (has_prompt: it was given, even empty)
  bool has_prompt = false;
  std::string input, output, stats_path, config_file, tokenizer_dir;
  std::string graphs;        // --cuda-graphs as given, turned into load.cuda_graphs by the checks
  bool quiet = false, allow_empty = false, chat = false;
  std::string chat_thinking;  // --chat-thinking on|off ("": not given; Qwen3's enable_thinking)
  std::string chat_date;      // --chat-date TEXT ("": the template's own; Llama-3.1+'s date_string)
  std::string comm = "auto";
  double rank_timeout_s = 60;
  int64_t seed = 0;
  std::string lp_size = "auto";  // --lp-size K | auto: ranks per lookahead-parallel group (data-parallel groups)
  int lp_k = 0;                  // --lp-size as a number (0: auto), set by the checks
  std::string share_drafts = "on";  // --share-drafts on|off: finished requests' tokens reach every group's drafts
  int simulate_ranks = 0;
  double collective_latency_us = 0;
  std::string batch = "auto";  // --batch N | auto: requests in flight (continuous batching)
  int prefill_chunk = 256;     // --prefill-chunk: prompt tokens a joining request feeds per step
  std::string draft_cap = "on";  // --draft-cap on|off: the batch's draft cap (draft_cap.h)
  std::string kv_memory;       // --kv-memory BYTES[K|M|G]: the KV cache all requests in flight may hold
  int batch_size = 0;          // --batch as a number (0: auto), set by the checks
  int64_t kv_bytes = 0;        // --kv-memory in bytes (0: requests in flight x the context)

  bool from_file() const { return !has_prompt; }
};

// Binds every flag of `generate` (with its default and help line) to `o`.
void add_generate_options(boost::program_options::options_description& d, GenerateOptions& o);
// Parses the command line and --config FILE (flags win). Returns false when --help was printed.
bool parse_generate_options(int argc, char** argv, GenerateOptions& o);
// Checks every value before anything is loaded (one la::Error naming the flag) and resolves model NAMEs to
// directories (model_path.h).
void check_generate_options(GenerateOptions& o);

}  // namespace la::cli
