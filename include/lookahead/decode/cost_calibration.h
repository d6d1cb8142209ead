// Calibration of the forward cost model at load: a few timed forwards of the model at the bucket sizes.
// No libtorch (it drives the StepModel interface).
#pragma once
#include "lookahead/decode/cost_model.h"
#include "lookahead/model/step_model.h"

namespace la {

// A forward cost model whose buckets reach `max_plan_tokens` (at most 256 and what the context allows after a
// committed context of min(64, max_positions / 4) tokens, the typical cache a step attends to), each set to the
// fastest of `repeats` timed chain forwards of that size (the fastest is the least disturbed on a shared
// machine; later real steps pull the model toward typical timings). One untimed forward of the largest size up to
// 64 first warms the weights and the allocator. A bucket `known` holds (an earlier calibration of this model on
// this clock: --batch auto's) takes its value and is not timed again. Buckets above 64 rows are extrapolated from
// the 32- and 64-row times when those show a forward linear in its rows (compute-bound, at least 10 ms for 64 rows:
// cost_calibration.cpp), else timed. The largest bucket timed up to 64 rows (at least 16) is timed once more with
// no output row, which gives the LM head's time per output row (ForwardCostModel::output_row_seconds: a prompt
// chunk's rows skip it). The model's cache is empty afterwards (and untouched when nothing was timed).
ForwardCostModel calibrate_forward_cost(StepModel& model, int max_plan_tokens, int repeats = 3,
                                        CostClock clock = CostClock::Wall, const ForwardCostModel* known = nullptr);

}  // namespace la
