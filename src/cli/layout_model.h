// The figures behind --lp-size auto for an --input job, printed at start next to the chosen layout: for every
// layout G x K of the job's W ranks (K dividing W), the job throughput modelled from the calibrated forward cost
// f(T) of this rank (cost_model.h). Groups of 1 batch their requests: G x B / f(B) (plain steps, B the --batch
// this rank resolved). A group of K > 1 runs one request at a time with lookahead parallelism: a plain step costs what
// one rank's does, and a step with the strategy's full draft of T tokens costs StepCostModel(f, K).step_seconds(T)
// (the slowest rank's part plus the collective latency); what it yields depends on the acceptance, unknown at
// start, so the line says how many tokens per step that draft step would have to yield to match groups of 1. On a
// CPU that is far more than any draft gives, hence groups of 1 (every rank streams all weights every step).
#pragma once
#include <string>

#include "lookahead/decode/cost_model.h"

namespace la::cli {

// `world` ranks; `batch`: requests in flight of a group of 1; `plan_tokens`: the strategy's full plan (1 + budget +
// lookahead nodes; 1 for ar); `latency_s`: the collective latency assumed per LP step. Returns "2x1: N tokens/s
// (batch B each); 1x2: ..." for the start-up line.
std::string modelled_layouts(const ForwardCostModel& f, int world, int batch, int plan_tokens, double latency_s);

}  // namespace la::cli
