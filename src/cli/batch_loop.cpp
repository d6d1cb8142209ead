#include "batch_loop.h"

#include <chrono>
#include <cstdio>
#include <iostream>

#include "job_options.h"
#include "progress.h"
#include "prompt_input.h"
#include "report.h"
#include "signals.h"
#include "stop_sequences.h"

#include "lookahead/util/clock.h"

namespace la::cli {
int choose_batch(const ForwardCostModel& f, int prompts, int64_t kv_rows, int64_t rows_per_request, double step_extra_s,
                 std::string& line) {
  const auto step = [&](int b) { return f.seconds(b) + step_extra_s; };
  int best = 1;
  double best_rate = 1.0 / step(1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "1: %.0f", best_rate);
  line = buf;
  for (int b = 2; b <= 64; b *= 2) {
    if (b > prompts || int64_t(b) * rows_per_request > kv_rows) break;
    const double rate = b / step(b);
    std::snprintf(buf, sizeof buf, ", %d: %.0f", b, rate);
    line += buf;
    if (rate < best_rate * 1.20) break;
    best = b;
    best_rate = rate;
  }
  line = "modelled plain tokens/s by requests in flight " + line;
  return best;
}

LoopResult run_batched_requests(const RequestInputs& in, StepModel& model, Strategy& strategy,
                                const BatchSetup& setup, RequestSource& src, BatchCounters* counters) {
  const GenerateOptions& o = in.o;
  LoopResult res;
  for (char k : in.skip) res.already += k;
  Progress progress(in.prompts.size(), res.already, o.job.progress_interval, !o.quiet && o.from_file(), in.tag);
  if (o.job.rss_every > 0) std::cerr << memory_line(in.tag, 0, strategy.counters()) + "\n";
  const ModelConfig& cfg = model.config();
  BatchRunner br(model, strategy, cfg, setup.opt, setup.cost, setup.make_controller, setup.replicas);
  std::vector<Clock::time_point> started(br.slots());
  std::vector<int> max_new_of(br.slots(), 0);
  std::vector<std::unique_ptr<TextStopSequences>> stops_of(br.slots());  // each request's stop sequences, if any
  const auto t_job = Clock::now();
  int64_t pending = -1;  // an index the source handed out that waits for room in the batch
  bool stopping = false;
  Clock::time_point stop_seen;

  auto max_new_for = [&](const PromptRecord& p, const GenParams& g) {
    return g.max_new_tokens > 0 ? g.max_new_tokens : cfg.max_positions + 1 - static_cast<int>(p.ids.size());
  };
  // A finished request: its record, then the draft state that includes it (the runner's end adds its output).
  auto finish = [&](int slot) {
    const PromptRecord& p = in.prompts[size_t(br.tag(slot))];
    StepRunner& r = br.runner(slot);
    GenResult g;
    g.ids.assign(r.seq().begin() + static_cast<long>(p.ids.size()), r.seq().end());
    g.stats = r.stats();
    g.stats.new_tokens = static_cast<int>(g.ids.size());
    g.stats.seconds = seconds_since(started[slot]);
    const std::string stop = stops_of[slot] ? stops_of[slot]->matched() : std::string();
    const nlohmann::json rec =
        result_record(p, g, output_text(in.tok, p.ids, in.eos_ids, g.ids), strategy.name(), stop);
    src.finished(rec);
    res.total.add(g.stats);
    if (!o.stats_path.empty()) {
      res.per_prompt.push_back(rec["stats"]);
      res.per_prompt.back()["id"] = p.id;
    }
    ++res.ran;
    br.release(slot);
    strategy.checkpoint();
    progress.request_done(g.stats.new_tokens);
    if (o.job.rss_every > 0 && res.ran % o.job.rss_every == 0)
      std::cerr << memory_line(in.tag, res.ran, strategy.counters()) + "\n";
  };
  auto admit = [&] {
    while (!stopping) {
      if (pending < 0) {  // wait for an index only when nothing is in flight (else: after the next step)
        pending = src.next(br.active() == 0);
        if (pending < 0) {
          pending = -1;
          return;
        }
      }
      const size_t next = static_cast<size_t>(pending);
      const PromptRecord& p = in.prompts[next];
      const int plen = static_cast<int>(p.ids.size());
      const GenParams g = record_gen(o.gen, p);  // the flags, or the record's own settings
      check_prompt(cfg, p.ids, g.max_new_tokens);
      const int max_new = max_new_for(p, g);
      if (!br.fits_ever(plen, max_new)) {
        std::cerr << (in.tag + "error: prompt " + p.id.dump() + " needs " +
                      std::to_string(br.rows_needed(plen, max_new)) + " KV cache rows but --kv-memory holds " +
                      std::to_string(br.kv_rows()) + "; refused, the job goes on\n");
        ++res.refused;
        pending = -1;
        continue;
      }
      if (!br.fits_now(plen, max_new)) return;
      SampleParams sp = g.sample;
      sp.stream = next;  // the prompt's index, as in the one-at-a-time loop: resumed sampled runs match
      std::unique_ptr<TextStopSequences> stops;
      if (!record_stops(o, p).empty())
        stops = std::make_unique<TextStopSequences>(in.tok, p.ids, in.eos_ids, record_stops(o, p));
      const int slot =
          br.add(int64_t(next), p.ids, sp, StepLimits{cfg.max_positions, std::max(max_new, 0), true, stops.get()});
      stops_of[slot] = std::move(stops);
      started[slot] = Clock::now();
      max_new_of[slot] = max_new;
      pending = -1;
      if (br.runner(slot).done()) finish(slot);  // --max-new-tokens reached at once
    }
  };
  // After a stop: each request in flight is kept only if it can finish within the grace at its rate so far.
  auto drop_late = [&] {
    const double left = o.job.stop_grace - seconds_since(stop_seen);
    for (int s = 0; s < br.slots(); ++s) {
      if (!br.busy(s)) continue;
      const int made = br.runner(s).generated();
      const double eta = made > 0 ? seconds_since(started[s]) / made * (max_new_of[s] - made) : 1e300;
      if (left <= 0 || eta > left) {
        br.runner(s).stats().finish_reason = "cancelled";
        br.release(s);
        res.dropped = true;
      }
    }
  };

  src.on_remote = [&progress](const nlohmann::json& rec) { progress.request_done(rec.value("new_tokens", 0)); };
  while (true) {
    admit();
    if (br.active() == 0) break;
    if (!stopping && stop_signal() != 0) {
      stopping = true;
      stop_seen = Clock::now();
      strategy.checkpoint();  // a launcher's SIGKILL during the grace loses only the requests in flight
    }
    if (stopping) {
      drop_late();
      if (br.active() == 0) break;
    }
    br.step();
    src.poll();
    for (int s : br.finished()) finish(s);
    progress.set_in_flight(br.active());
    int in_flight_tokens = 0;
    for (int s = 0; s < br.slots(); ++s)
      if (br.busy(s)) in_flight_tokens += br.runner(s).generated();
    progress.step(in_flight_tokens);
  }
  src.on_remote = nullptr;  // it points at this loop's progress
  progress.finish();
  res.total.seconds = seconds_since(t_job);  // the job's wall time: requests overlap
  res.interrupted = (stopping || stop_signal() != 0) && (pending >= 0 || !src.drained());
  res.interrupted = res.interrupted || res.dropped;
  if (counters) *counters = br.counters();
  res.slot_counters = br.slot_counters();
  return res;
}

}  // namespace la::cli
