// A group owner's request loop with continuous batching (--batch N > 1): up to N requests in flight through one
// BatchRunner (decode/batch_runner.h), every step one forward over all of them. The job guarantees are those of
// the one-at-a-time loop (request_loop.h): a record per request as it finishes (in finishing order, each with its
// id), the strategy's state checkpointed after every finished request, progress lines (with the requests in
// flight), --resume skipping finished ids, and on SIGINT/SIGTERM no new request is admitted; each request in
// flight is finished if it can be within --stop-grace at its own rate so far, else dropped (never written half),
// so a resumed run redoes exactly the dropped ones. A request that could never fit the KV budget (--kv-memory) is
// refused with one line naming it, and the job goes on. Requests come from a RequestSource (job_queue.h): the owner
// asks for one whenever it has a free slot, waiting only when nothing is in flight; records go back to it, and
// src.poll() runs once per step (on rank 0: the other groups' queue requests, between its steps).
#pragma once
#include <functional>
#include <memory>

#include "lookahead/decode/batch_runner.h"
#include "lookahead/decode/cost_model.h"
#include "lookahead/model/step_model.h"
#include "request_loop.h"

namespace la::cli {

struct BatchSetup {
  BatchOptions opt;
  StepCostModel* cost = nullptr;  // adaptive drafting's cost model, or null
  std::function<std::unique_ptr<DraftController>(Strategy&)> make_controller;  // null: fixed drafts
  SlotExecutor* replicas = nullptr;  // lookahead parallelism: the slots over its replica group (null: here)
};

LoopResult run_batched_requests(const RequestInputs& in, StepModel& model, Strategy& strategy,
                                const BatchSetup& setup, RequestSource& src, BatchCounters* counters);

// --batch auto: the number of requests in flight with the highest modelled job throughput B / (f(B) + extra) over
// the calibrated forward cost f (rows = requests, a plain step each) and a fixed cost per step (`step_extra_s`: the
// collective latency of a lookahead-parallel group, whose every rank runs a row of every slot; 0 on one rank),
// among 1, 2, 4, ..., 64, at most `prompts` and what the KV budget holds; a doubling must gain at least 20% to be
// taken (latency grows with B). `line` receives the modelled figures for the start-up line.
int choose_batch(const ForwardCostModel& f, int prompts, int64_t kv_rows, int64_t rows_per_request, double step_extra_s,
                 std::string& line);

}  // namespace la::cli
