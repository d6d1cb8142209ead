// Modelled job throughput per layout for --lp-size auto (layout_model.h).
#include "layout_model.h"

#include <algorithm>
#include <cstdio>


namespace la::cli {

std::string modelled_layouts(const ForwardCostModel& f, int world, int batch, int plan_tokens, double latency_s) {
  std::string line;
  char buf[224];
  const int b = std::max(batch, 1);
  const double one_rate = b / f.seconds(b);  // groups of 1: per-rank batched plain tokens/s
  for (int k = 1; k <= world; ++k) {
    if (world % k != 0) continue;
    const int groups = world / k;
    if (k == 1) {
      std::snprintf(buf, sizeof buf, "%dx1: %.0f tokens/s (batch %d each)", groups, groups * one_rate, b);
    } else {
      // Every part of a slot's plan holds the slot's root, so every rank of the group runs b rows in a plain
      // step, and b parts of a full draft in a draft step.
      const StepCostModel lp(f, k, latency_s);
      const double plain = groups * b / (f.seconds(b) + latency_s);
      const double draft_s = f.seconds(b * lp.part_tokens(plan_tokens)) + latency_s;
      // tokens per slot and draft step a group needs to make the job as fast as `world` groups of 1
      const double need = one_rate * k * draft_s / b;
      if (plan_tokens > 1)
        std::snprintf(buf, sizeof buf,
                      "; %dx%d: %.0f with plain steps, a step of %d %d-token drafts costs %.2f ms and would need "
                      "%.1f tokens per request and step to match",
                      groups, k, plain, b, plan_tokens, draft_s * 1e3, need);
      else
        std::snprintf(buf, sizeof buf, "; %dx%d: %.0f (plain steps)", groups, k, plain);
    }
    line += buf;
  }
  return "modelled job tokens/s by layout (groups x ranks each, batch " + std::to_string(b) +
         " each; calibrated forward): " + line;
}

}  // namespace la::cli
