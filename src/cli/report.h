// What a `generate` run reports: the --output record of a prompt, the --stats-json file, the summary lines on
// stderr and the line of an interrupted run.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generate_options.h"
#include "lookahead/decode/batch_runner.h"
#include "lookahead/decode/draft_controller.h"
#include "lookahead/decode/generator.h"
#include "lookahead/tokenizer/tokenizer.h"
#include "lookahead/dist/comm.h"
#include "lookahead/io/prompt_records.h"
#include "run_executor.h"
#include "run_setup.h"

namespace la::cli {

struct LoopResult;

nlohmann::json stats_json(const RequestStats& s);
// Adaptive drafting: steps per chosen draft budget, plain-step fallbacks, probes.
nlohmann::json adaptive_json(const AdaptiveCounters& a);

// "text": exactly what streaming prints for the generated `ids` (without the eos that ended generation).
std::string output_text(const Tokenizer& tok, const std::vector<int32_t>& prompt_ids,
                        const std::vector<int32_t>& eos_ids, const std::vector<int32_t>& ids);
// One --output line: id, prompt, prompt_ids, ids, text, finish_reason, new_tokens, steps, seconds, tokens_per_s,
// strategy, stats (+ messages for a chat record, stats.adaptive with adaptive drafting).
// `stop`: the stop sequence that ended the request ("": none), as the record's "stop".
nlohmann::json result_record(const PromptRecord& p, const GenResult& r, const std::string& text,
                             const std::string& strategy, const std::string& stop = "");

// What the end-of-run reports read.
struct RunReport {
  const GenerateOptions& o;
  const LoopResult& loop;
  const Strategy& strategy;
  const Comm& comm;
  RunExecutor& exec;
  const Adaptive& adaptive;
  size_t prompts;  // in the input, skipped ones included
  const std::string& tag;
  const BatchCounters* batch = nullptr;  // the batched loop's counters (--stats-json "batch"), when it ran
};

// --stats-json: aggregate and per-prompt stats, strategy counters, adaptive drafting, ranks, simulation.
void write_stats_file(const RunReport& r);
// The summary on stderr (not with --quiet): prompts, tokens, steps, S, seconds, tokens/s (+ the modelled run).
void print_summary(const RunReport& r);
// --batch: how the step budget was spent (rows per forward, draft and prompt shares, requests in flight, refused).
void print_batch_summary(const std::string& tag, int batch, const BatchCounters& c, size_t refused);
// The one line of an interrupted run (even with --quiet); returns its exit status (128 + signal).
int report_interrupted(const RunReport& r);

}  // namespace la::cli
