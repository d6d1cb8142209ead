// Ouroboros (Zhao et al. 2024): a small draft model drafts with lookahead decoding, drafts are lengthened by
// phrases from a phrase pool, and the target's verification results refine the pool.
//
// Draft side. The draft model runs LADE (make_lade_strategy with window/ngram/guesses = draft_window/draft_ngram/
// draft_guesses) through its own LocalExecutor with greedy sampling: plan -> run -> verify_plan -> commit, so one
// draft forward can yield several tokens (its own StepRunner, the one every generation uses). The draft keeps its own
// sequence `dseq` (the loop's: the target's sequence plus the tokens it drafted ahead) and its LADE window
// continues across rounds of a request.
//
// Sync (start of every target step, `seq` = the target's sequence):
//   * seq is a prefix of dseq (the target accepted everything proposed and its next token equals the draft's next
//     drafted token, e.g. tokens drafted beyond gamma): dseq and the draft cache are kept;
//   * otherwise L = longest common prefix of dseq and seq; the draft cache is truncated to
//     min(cache_len, L, seq.size()-1) tokens and dseq = seq. The draft cache then holds dseq[0, C) and the
//     LocalExecutor re-feeds the pending chain dseq[C, size) in front of the next draft plan.
//   The draft then runs forwards until dseq holds gamma tokens beyond seq (at most the target's max_depth), it
//   drafted an eos, or its own context is full: a draft forward runs only while dseq.size() <= the draft's
//   max_positions (the LADE plan depth is capped so no draft node reaches position max_positions). Past that the
//   draft proposes nothing for the rest of the request (the target continues; extensions still apply, keyed by
//   the root). A prompt longer than the draft's context disables the draft for the request.
//
// Target plan (one forward): the root, the draft chain (d_1..d_C, all draft=1, C <= max_depth), and at the chain's
// end node up to K = `extensions` phrases from the pool that start with the chain's last token (the root when
// C = 0): phrase [last, p_1..p_n] hangs p_1..p_n off the chain end, merged as a trie (shared prefixes share nodes),
// draft=1, cut at max_depth. Phrases holding tokens outside the vocabulary are skipped.
//
// The target's plan for gamma = 4 and K = 2 extensions, pool phrases [d4 p q] and [d4 s t] keyed by the
// chain's last token; every node is a draft node, numbered by plan index (depth = distance from r0):
//
//   r0 - d1 - d2 - d3 - d4 - p5 - q6       the draft chain, then the first extension off its end
//                         |
//                         +- s7 - t8       the second extension (a phrase [d4 p x] would add only x under p5)
//
// What the partitioner (parallel/partition.cpp) cuts, K = 2 (measured, partition_plan): part 0 = r0 d1..d4 p5 q6,
// part 1 = r0 d1..d4 s7 t8: the chain is the ancestor path of both extensions, so both parts compute it. The
// draft model's own steps are LADE plans (the diagram in strategy_lade.cpp) on the draft's replica only.
//
// Pool updates after verification (r[i] = the target's result at plan node i, m = accepted draft tokens):
//   * m < C (mismatch inside the draft): insert [r[m], r[m+1], ..., r[C]]: the correction token followed by the
//     target's results at the rejected draft nodes m+1..C (C-m+1 tokens, keyed by the correction token).
//   * m == C (whole draft accepted, also when C == 0): for each extension [last, p_1..p_n] planned (in full or cut
//     at max_depth to [last, p_1..p_k]), its corrected version is [last, r[C], r[e_1], ..., r[e_{k-1}]] (the
//     target's results along the extension's nodes e_i, same length). If it differs from the planned phrase,
//     replace(planned, corrected); if equal (the extension was accepted in full), insert(planned) to refresh it.
//   Phrases of one token carry no draft and are never inserted.
// The pool (max(16, 2K) phrases per key) persists across requests; with `pool_state` it is loaded at construction
// when the file exists (a corrupt file throws the pool's la::Error) and saved atomically by checkpoint() when a
// step updated it since the last save.
#include <algorithm>

#include "lookahead/decode/executor.h"
#include "lookahead/decode/state_checkpoint.h"
#include "lookahead/decode/step_runner.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/draft/phrase_pool.h"
#include "lookahead/model/step_model.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace la {
namespace {

class OuroborosStrategy final : public Strategy {
 public:
  // The phrase pool and its state file, shared by the strategies spawned for a batch.
  struct Shared {
    explicit Shared(const OuroborosOptions& o)
        : state(o.pool_state, !o.state_read_only), pool(std::max(16, 2 * o.extensions)) {}
    StateCheckpoint state;
    PhrasePool pool;
  };

  OuroborosStrategy(const StrategyOptions& o, StepModel& draft)
      : OuroborosStrategy(o, draft, nullptr, std::make_shared<Shared>(o.ouroboros)) {
    if (state_.enabled() && file_exists(state_.path())) pool_.load(state_.path());
  }
  // `own_draft`: a fork of the draft model for a spawned strategy (its own cache), or null (`draft` itself).
  OuroborosStrategy(const StrategyOptions& o, StepModel& draft, std::unique_ptr<StepModel> own_draft,
                    std::shared_ptr<Shared> sh)
      : opt_(o), own_draft_(std::move(own_draft)), draft_(own_draft_ ? *own_draft_ : draft), dexec_(draft_),
        gamma_(o.ouroboros.gamma), K_(o.ouroboros.extensions), sh_(std::move(sh)), state_(sh_->state),
        pool_(sh_->pool) {
    StrategyOptions lo;
    lo.name = lade_strategy_info().name;
    lo.seed = o.seed;
    lo.lade = o.ouroboros.lade;
    lo.lade.pool_from_prompt = false;
    lade_ = make_lade_strategy(lo);
    dloop_ = std::make_unique<StepRunner>(dexec_, *lade_, draft_.config());
  }

  std::string name() const override { return ouroboros_strategy_info().name; }
  // A request of the batch: its own draft-model replica (a fork: own cache, shared weights) and LADE state, the
  // one phrase pool. A draft model that cannot be forked cannot serve a batch.
  std::unique_ptr<Strategy> spawn(int slot) override {
    std::unique_ptr<StepModel> fork = draft_.fork();
    if (!fork) return nullptr;
    StrategyOptions o = opt_;
    o.seed = opt_.seed + 0x9E3779B97F4A7C15ULL * uint64_t(slot);
    return std::make_unique<OuroborosStrategy>(o, draft_, std::move(fork), sh_);
  }
  // gamma draft tokens plus K extensions of at most gamma tokens (pool phrases are corrections of <= gamma + 1
  // tokens, keyed by their first); the ladder cuts the chain first, then the extensions.
  int max_draft_budget() const override { return gamma_ + K_ * gamma_; }

  void begin_request(const std::vector<int32_t>& prompt) override {
    const auto& dc = draft_.config();
    draft_on_ = !prompt.empty() && static_cast<int>(prompt.size()) <= dc.max_positions;
    if (!draft_on_) return;
    SampleParams sp;  // greedy
    // No eos stop and no length limit: the draft runs ahead of the target (run_draft bounds it); its context
    // bounds the plans' depth.
    dloop_->begin(prompt, sp, StepLimits{dc.max_positions, -1, false});
  }

  void plan(const std::vector<int32_t>& seq, int max_depth, StepPlan& out) override {
    out.reset(seq.back());
    chain_len_ = 0;
    ext_.clear();
    const auto& dc = draft_.config();
    // Budget (adaptive drafting): the draft chain first (gamma' = min(gamma, budget) tokens, so a small budget
    // also runs the draft model less), then extension nodes while the budget lasts.
    int left = budget_or(max_draft_budget());
    const int want = std::min({gamma_, max_depth, left});
    chain_.clear();
    if (draft_on_ && want > 0) run_draft(seq, want);
    int parent = 0;
    for (int32_t t : chain_) parent = out.add(t, parent, true);
    chain_len_ = static_cast<int>(chain_.size());
    proposed_ += chain_len_;
    left -= chain_len_;
    if (K_ <= 0 || left <= 0) return;
    const int32_t last = out.tokens[parent];
    const int room = max_depth - chain_len_;  // extension tokens that fit below the chain end
    if (room <= 0) return;
    const int chain_end = parent;
    for (auto& ph : pool_.lookup(last, K_)) {
      if (ph.size() < 2) continue;
      bool ok = true;
      for (int32_t t : ph) ok = ok && t >= 0 && t < dc.vocab;
      if (!ok) continue;
      Ext e;
      const int n = std::min<int>(static_cast<int>(ph.size()) - 1, room);
      e.phrase.assign(ph.begin(), ph.begin() + 1 + n);
      int p = chain_end;
      for (int i = 1; i <= n; ++i) {
        int child = -1;
        if (left <= 0) break;
        for (int c = chain_end + 1; c < out.size(); ++c)
          if (out.parents[c] == p && out.tokens[c] == ph[i]) { child = c; break; }
        if (child < 0) {
          if (left <= 0) break;
          child = out.add(ph[i], p, true);
          ++ext_planned_;
          --left;
        }
        e.nodes.push_back(child);
        p = child;
      }
      if (e.nodes.empty()) break;                // budget spent
      e.phrase.resize(e.nodes.size() + 1);      // as planned (cut by the budget like by max_depth)
      ext_.push_back(std::move(e));
    }
  }

  void update(const std::vector<int32_t>&, const StepPlan&, const std::vector<int32_t>& results,
              const Verdict& v) override {
    const int accepted = static_cast<int>(v.path.size()) - 1;
    state_.changed();  // the step may insert, replace or refresh pool phrases (a cheap over-estimate)
    const int m = std::min(accepted, chain_len_);  // the chain hangs off the root, extensions off its end
    accepted_ += m;
    ext_accepted_ += accepted - m;
    if (m < chain_len_) {
      std::vector<int32_t> corr(results.begin() + m, results.begin() + chain_len_ + 1);
      if (corr.size() >= 2) pool_.insert(corr);
      return;
    }
    for (const auto& e : ext_) {
      std::vector<int32_t> corr;
      corr.push_back(e.phrase[0]);
      corr.push_back(results[chain_len_]);
      for (size_t i = 0; i + 1 < e.nodes.size(); ++i) corr.push_back(results[e.nodes[i]]);
      if (corr == e.phrase) pool_.insert(e.phrase);
      else pool_.replace(e.phrase, corr);
    }
  }

  void end_request(const std::vector<int32_t>&) override {
    ext_.clear();
    chain_len_ = 0;
  }

  // Another group's request (--lp-size): from each output position, the phrase of the target's tokens a full
  // round would verify there (gamma + 1 tokens, keyed by the token before, the last prompt token first), as the
  // corrections update() inserts. The request in flight keeps its draft and extensions.
  void learn(const std::vector<int32_t>& seq, size_t prompt_len) override {
    if (seq.size() <= prompt_len || prompt_len == 0) return;
    const size_t len = static_cast<size_t>(gamma_) + 1;
    std::vector<int32_t> ph;
    for (size_t s = prompt_len - 1; s + 1 < seq.size(); ++s) {
      ph.assign(seq.begin() + static_cast<std::ptrdiff_t>(s),
                seq.begin() + static_cast<std::ptrdiff_t>(std::min(s + len, seq.size())));
      pool_.insert(ph);
    }
    state_.changed();
    ++learned_;
  }

  void checkpoint() override {
    state_.write_if_changed([this](const std::string& path) { pool_.save(path); });
  }

  std::map<std::string, double> counters() const override {
    std::map<std::string, double> c = {
        {"draft_forwards", double(draft_forwards_)},
        {"draft_tokens", double(draft_tokens_)},
        {"draft_tokens_per_forward", draft_forwards_ ? double(draft_tokens_) / draft_forwards_ : 0.0},
        {"draft_proposed", double(proposed_)},
        {"draft_accepted", double(accepted_)},
        {"draft_acceptance", proposed_ ? double(accepted_) / proposed_ : 0.0},
        {"extension_tokens", double(ext_planned_)},
        {"extension_accepted", double(ext_accepted_)},
        {"pool_phrases", double(pool_.size())},
        {"pool_keys", double(pool_.keys())},
        {"pool_learned_requests", double(learned_)}};
    state_.add_counters(c, "pool");
    return c;
  }

 private:
  struct Ext {
    std::vector<int32_t> phrase;  // as planned (cut at max_depth), phrase[0] = the chain's last token
    std::vector<int32_t> nodes;   // plan nodes of phrase[1..]
  };

  // Syncs the draft with `seq` and leaves up to `want` draft tokens following seq in chain_.
  void run_draft(const std::vector<int32_t>& seq, int want) {
    const auto& dc = draft_.config();
    std::vector<int32_t>& dseq = dloop_->seq();
    const size_t S = seq.size();
    size_t L = 0;
    while (L < S && L < dseq.size() && dseq[L] == seq[L]) ++L;
    if (L < S) {  // seq is not a prefix of dseq: roll the draft back to the common prefix
      const int keep = std::min<int>({draft_.cache_len(), static_cast<int>(L), static_cast<int>(S) - 1});
      if (keep < draft_.cache_len()) draft_.truncate(keep);
      dseq = seq;
    }
    auto drafted_eos = [&] {
      for (size_t i = S; i < dseq.size(); ++i)
        if (dc.is_eos(dseq[i])) return true;
      return false;
    };
    while (static_cast<int>(dseq.size() - S) < want && static_cast<int>(dseq.size()) <= dc.max_positions &&
           !drafted_eos()) {
      draft_tokens_ += dloop_->step();
      ++draft_forwards_;
    }
    chain_.clear();
    for (size_t i = S; i < dseq.size() && static_cast<int>(chain_.size()) < want; ++i) {
      chain_.push_back(dseq[i]);
      if (dc.is_eos(dseq[i])) break;
    }
  }

  StrategyOptions opt_;
  std::unique_ptr<StepModel> own_draft_;
  StepModel& draft_;
  LocalExecutor dexec_;
  std::unique_ptr<Strategy> lade_;
  std::unique_ptr<StepRunner> dloop_;  // the draft model's steps; its seq() is the draft sequence
  int gamma_, K_;
  std::shared_ptr<Shared> sh_;
  StateCheckpoint& state_;
  PhrasePool& pool_;
  bool draft_on_ = false;
  std::vector<int32_t> chain_;  // the draft chain of the current target step
  int chain_len_ = 0;
  std::vector<Ext> ext_;
  int64_t draft_forwards_ = 0, draft_tokens_ = 0, proposed_ = 0, accepted_ = 0, ext_planned_ = 0,
          ext_accepted_ = 0;
  uint64_t learned_ = 0;  // other groups' requests added by learn()
};

}  // namespace

std::unique_ptr<Strategy> make_ouroboros_strategy(const StrategyOptions& o, StepModel* draft) {
  LA_CHECK(draft != nullptr, "--strategy ouroboros needs a draft model");
  validate_ouroboros_options(o);
  return std::make_unique<OuroborosStrategy>(o, *draft);
}

void add_ouroboros_flags(StrategyFlags& f, StrategyOptions& o) {
  auto& u = o.ouroboros;
  f.add("draft-model", &u.draft_model, "ouroboros: draft model directory or random:");
  f.add("gamma", &u.gamma, "ouroboros: draft tokens per round");
  add_lade_size_flags(f, u.lade, "draft-", "ouroboros: the draft model's LADE");
  f.add("extensions", &u.extensions, "ouroboros: K phrase extensions verified per step");
  f.add("pool-state", &u.pool_state, "ouroboros: phrase pool file loaded/saved");
}

// The draft model's LADE sizes are checked by LADE's own check under their own names (--draft-window).
void validate_ouroboros_options(const StrategyOptions& o) {
  const auto& u = o.ouroboros;
  LA_CHECK(u.gamma >= 1 && u.gamma <= 256, "--gamma must be in [1, 256] (got ", u.gamma, ")");
  validate_lade_sizes(u.lade, "draft-");
  LA_CHECK(u.extensions >= 0 && u.extensions <= 64, "--extensions must be in [0, 64] (got ", u.extensions, ")");
  LA_CHECK(o.name != ouroboros_strategy_info().name || !u.draft_model.empty(),
           "--strategy ouroboros needs --draft-model");
}

const StrategyInfo& ouroboros_strategy_info() {
  static const StrategyInfo row{"ouroboros", "a draft model drafting with LADE, lengthened by a phrase pool",
                                add_ouroboros_flags, validate_ouroboros_options, make_ouroboros_strategy,
                                [](const StrategyOptions& o) { return o.ouroboros.draft_model; }, nullptr,
                                [](StrategyOptions& o) { o.ouroboros.state_read_only = true; }};
  return row;
}

}  // namespace la
