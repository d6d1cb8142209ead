// The figures behind --lp-size auto for an --input job, printed at start next to the chosen layout: for every
// layout G x K of the job's W ranks (K dividing W), the job throughput modelled from the calibrated forward cost
// f(T) of this rank (cost_model.h), every group with the --batch B this rank resolved. Groups of 1: G x B / f(B)
// (plain steps). A group of K > 1 keeps every slot on every rank and gives every rank each slot's root, so a plain
// step costs f(B) + the collective latency on every rank (G x B / that), and a step with the strategy's full draft
// of T tokens for every slot costs f(B x part(T)) + latency (part: the slowest rank's share, StepCostModel); what
// it yields depends on the acceptance, unknown at start, so the line says how many tokens per request and step
// that draft step would have to yield to match groups of 1. On a CPU that is far more than any draft gives, hence
// groups of 1 (every rank streams all weights every step).
#pragma once
#include <string>

#include "lookahead/decode/cost_model.h"

namespace la::cli {

// `world` ranks; `batch`: requests in flight of every group; `plan_tokens`: the strategy's full plan (1 + budget +
// lookahead nodes; 1 for ar); `latency_s`: the collective latency assumed per LP step. Returns "2x1: N tokens/s
// (batch B each); 1x2: ..." for the start-up line.
std::string modelled_layouts(const ForwardCostModel& f, int world, int batch, int plan_tokens, double latency_s);

}  // namespace la::cli
