#include "request_loop.h"

#include <iostream>
#include <optional>
#include <string>

#include "job_options.h"
#include "progress.h"
#include "prompt_input.h"
#include "report.h"
#include "signals.h"
#include "stop_sequences.h"

namespace la::cli {
namespace {

// One prompt through the generator, its text streamed to stdout when `stream` (a --prompt run).
GenResult generate_one(const RequestInputs& in, const PromptRecord& p, bool stream, Generator& gen,
                       Strategy& strategy, const GenParams& gp, StopControl& stop, Progress& progress,
                       RequestSource& src) {
  TextStream ts(in.tok, p.ids, in.eos_ids);
  if (stream) std::cout << p.text << (in.o.chat ? "\n" : "") << std::flush;  // a chat: the user's text, own line
  auto on_tokens = [&](const std::vector<int32_t>& ids) {
    if (stream) std::cout << ts.push(ids) << std::flush;
    if (stop.on_step(static_cast<int>(ids.size()))) strategy.checkpoint();  // save state now, again at the end
    progress.step(static_cast<int>(ids.size()));
    src.poll();  // rank 0 answers the other groups between its steps; an owner learns of a stop
  };
  GenResult r = gen.generate(p.ids, gp, on_tokens);
  if (stream) std::cout << ts.finish() << std::endl;
  return r;
}

// Adds a finished request to the totals and writes its record.
void record_result(const RequestInputs& in, const PromptRecord& p, const GenResult& r, const Strategy& strategy,
                   const std::string& stop, RequestSource& src, LoopResult& res) {
  res.total.add(r.stats);
  const nlohmann::json rec =
      result_record(p, r, output_text(in.tok, p.ids, in.eos_ids, r.ids), strategy.name(), stop);
  src.finished(rec);
  if (!in.o.stats_path.empty()) {  // kept only for --stats-json (about 1 KB per prompt)
    res.per_prompt.push_back(rec["stats"]);
    res.per_prompt.back()["id"] = p.id;
  }
  ++res.ran;
}

}  // namespace

LoopResult run_requests(const RequestInputs& in, Generator& gen, Strategy& strategy, RequestSource& src) {
  const GenerateOptions& o = in.o;
  LoopResult res;
  for (char k : in.skip) res.already += k;
  Progress progress(in.prompts.size(), res.already, o.job.progress_interval, !o.quiet && o.from_file(), in.tag);
  StopControl stop(o.job.stop_grace);
  GenParams gp = o.gen;
  gp.cancel = stop.cancel_flag();
  const bool stream = o.has_prompt && !o.quiet;
  if (o.job.rss_every > 0) std::cerr << memory_line(in.tag, 0, strategy.counters()) + "\n";
  src.on_remote = [&progress](const nlohmann::json& rec) { progress.request_done(rec.value("new_tokens", 0)); };
  for (;;) {
    const int64_t next = src.next(true);
    if (next < 0) {  // none left, or a stop: interrupted when prompts were left
      res.interrupted = stop_signal() != 0 && !src.drained();
      break;
    }
    const size_t i = static_cast<size_t>(next);
    const auto& p = in.prompts[i];
    gp = record_gen(o.gen, p);  // the flags, or the record's own settings
    gp.cancel = stop.cancel_flag();
    gp.sample.stream = i;  // the prompt's index, not the count processed: resumed sampled runs match
    std::optional<TextStopSequences> stops;  // the request's stop sequences (--stop, its record's "stop")
    if (!record_stops(o, p).empty()) gp.stop = &stops.emplace(in.tok, p.ids, in.eos_ids, record_stops(o, p));
    stop.begin_request(gp.max_new_tokens > 0 ? gp.max_new_tokens
                                             : in.max_positions + 1 - static_cast<int>(p.ids.size()));
    const GenResult r = generate_one(in, p, stream, gen, strategy, gp, stop, progress, src);
    if (r.stats.finish_reason == "cancelled") {  // dropped, never written: --resume redoes it
      res.interrupted = true;
      break;
    }
    record_result(in, p, r, strategy, stops ? stops->matched() : std::string(), src, res);
    // The record is in --output, now the state that includes it: a job killed later (SIGKILL, a lost host, Open
    // MPI's abort) loses at most the request in flight. Only a state that changed is written (state_checkpoint.h).
    strategy.checkpoint();
    progress.request_done(r.stats.new_tokens);
    if (o.job.rss_every > 0 && res.ran % o.job.rss_every == 0)
      std::cerr << memory_line(in.tag, res.ran, strategy.counters()) + "\n";
  }
  src.on_remote = nullptr;  // it points at this loop's progress
  progress.finish();
  res.dropped = stop.cancelled();
  return res;
}

}  // namespace la::cli
