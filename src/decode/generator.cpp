#include "lookahead/decode/generator.h"

#include <algorithm>
#include <chrono>

#include "lookahead/decode/cost_model.h"
#include "lookahead/util/error.h"

namespace la {
namespace {
using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
double thread_cpu_s() { return cost_clock_seconds(CostClock::ThreadCpu); }  // the cost model's thread clock
}  // namespace

void check_fits(const ModelConfig& cfg, size_t prompt_tokens, int max_new_tokens) {
  LA_CHECK(prompt_tokens > 0, "empty prompt: it encodes to no tokens");
  LA_CHECK(max_new_tokens >= 0, "--max-new-tokens must be >= 0 (got ", max_new_tokens, ")");
  // The last forward runs at position max_positions-1 and yields one more token.
  const size_t limit = static_cast<size_t>(cfg.max_positions) + 1;
  LA_CHECK(prompt_tokens <= static_cast<size_t>(cfg.max_positions), "prompt has ", prompt_tokens,
           " tokens but the model's context is ", cfg.max_positions, " positions (max_position_embeddings)");
  LA_CHECK(max_new_tokens == 0 || prompt_tokens + max_new_tokens <= limit, "prompt (", prompt_tokens,
           " tokens) plus --max-new-tokens ", max_new_tokens, " exceeds the model's context of ", cfg.max_positions,
           " positions (at most ", limit - prompt_tokens, " new tokens fit; --max-new-tokens 0 stops at the limit)");
}

void check_prompt(const ModelConfig& cfg, const std::vector<int32_t>& prompt, int max_new_tokens) {
  check_fits(cfg, prompt.size(), max_new_tokens);
  for (auto t : prompt) LA_CHECK(t >= 0 && t < cfg.vocab, "prompt token id ", t, " outside the vocabulary");
}

GenResult Generator::generate(const std::vector<int32_t>& prompt, const GenParams& gp,
                              const std::function<void(const std::vector<int32_t>&)>& on_tokens) {
  check_prompt(cfg_, prompt, gp.max_new_tokens);
  GenResult r;
  const auto t_start = Clock::now();
  const int max_new = gp.max_new_tokens > 0 ? gp.max_new_tokens : cfg_.max_positions + 1 - int(prompt.size());
  r.ids.reserve(static_cast<size_t>(std::max(max_new, 0)));
  runner_.begin(prompt, gp.sample, StepLimits{cfg_.max_positions, std::max(max_new, 0), true, gp.stop});
  const double cpu0 = thread_cpu_s();
  const std::vector<int32_t>& seq = runner_.seq();
  while (!runner_.done()) {
    if (gp.cancel && gp.cancel->load(std::memory_order_relaxed)) {
      runner_.stats().finish_reason = "cancelled";
      break;
    }
    const int kept = runner_.step();
    r.ids.insert(r.ids.end(), seq.end() - kept, seq.end());
    if (on_tokens) on_tokens(r.ids);
  }
  runner_.end();
  r.stats = runner_.stats();
  r.stats.new_tokens = static_cast<int>(r.ids.size());
  r.stats.seconds = secs(t_start, Clock::now());
  r.stats.cpu_s = thread_cpu_s() - cpu0;
  return r;
}

}  // namespace la
