// Ouroboros (Zhao et al. 2024): a small draft model drafts with lookahead decoding, drafts are lengthened by
// phrases from a phrase pool, and the target's verification results refine the pool.
//
// Draft side. The draft model runs LADE (make_lade_strategy with window/ngram/guesses = draft_window/draft_ngram/
// draft_guesses) through its own LocalExecutor with greedy sampling: plan -> run -> verify_plan -> commit, so one
// draft forward can yield several tokens. The draft keeps its own sequence `dseq_` (the target's sequence plus the
// tokens it drafted ahead) and its LADE window continues across rounds of a request.
//
// Sync (start of every target step, `seq` = the target's sequence):
//   * seq is a prefix of dseq_ (the target accepted everything proposed and its next token equals the draft's next
//     drafted token, e.g. tokens drafted beyond gamma): dseq_ and the draft cache are kept;
//   * otherwise L = longest common prefix of dseq_ and seq; the draft cache is truncated to
//     min(cache_len, L, seq.size()-1) tokens and dseq_ = seq. The draft cache then holds dseq_[0, C) and the
//     LocalExecutor re-feeds the pending chain dseq_[C, size) in front of the next draft plan.
//   The draft then runs forwards until dseq_ holds gamma tokens beyond seq (at most the target's max_depth), it
//   drafted an eos, or its own context is full: a draft forward runs only while dseq_.size() <= the draft's
//   max_positions (the LADE plan depth is capped so no draft node reaches position max_positions). Past that the
//   draft proposes nothing for the rest of the request (the target continues; extensions still apply, keyed by
//   the root). A prompt longer than the draft's context disables the draft for the request.
//
// Target plan (one forward): the root, the draft chain (d_1..d_C, all verify=1, C <= max_depth), and at the chain's
// end node up to K = `extensions` phrases from the pool that start with the chain's last token (the root when
// C = 0): phrase [last, p_1..p_n] hangs p_1..p_n off the chain end, merged as a trie (shared prefixes share nodes),
// verify=1, cut at max_depth. Phrases holding tokens outside the vocabulary are skipped.
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
// when the file exists (a corrupt file throws the pool's la::Error) and saved atomically by shutdown().
#include <algorithm>

#include "lookahead/decode/executor.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/draft/phrase_pool.h"
#include "lookahead/model/step_model.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace la {
namespace {

class OuroborosStrategy final : public Strategy {
 public:
  OuroborosStrategy(const StrategyOptions& o, StepModel& draft)
      : draft_(draft), dexec_(draft), gamma_(o.gamma), K_(o.extensions), pool_state_(o.pool_state),
        pool_(std::max(16, 2 * o.extensions)) {
    StrategyOptions lo = o;
    lo.name = "lade";
    lo.window = o.draft_window;
    lo.ngram = o.draft_ngram;
    lo.guesses = o.draft_guesses;
    lo.pool_from_prompt = false;
    lade_ = make_lade_strategy(lo);
    if (!pool_state_.empty() && file_exists(pool_state_)) pool_.load(pool_state_);
  }

  std::string name() const override { return "ouroboros"; }
  // gamma draft tokens plus K extensions of at most gamma tokens (pool phrases are corrections of <= gamma + 1
  // tokens, keyed by their first); the ladder cuts the chain first, then the extensions.
  int max_draft_budget() const override { return gamma_ + K_ * gamma_; }

  void begin_request(const std::vector<int32_t>& prompt) override {
    const auto& dc = draft_.config();
    draft_on_ = !prompt.empty() && static_cast<int>(prompt.size()) <= dc.max_positions;
    dseq_.clear();
    if (!draft_on_) return;
    SampleParams sp;  // greedy
    dexec_.begin(prompt, sp);
    lade_->begin_request(prompt);
    dseq_ = prompt;
  }

  void plan(const std::vector<int32_t>& seq, int max_depth, StepPlan& out) override {
    out.reset(seq.back());
    chain_len_ = 0;
    ext_.clear();
    const auto& dc = draft_.config();
    std::vector<int32_t> draft;
    // Budget (adaptive drafting): the draft chain first (gamma' = min(gamma, budget) tokens, so a small budget
    // also runs the draft model less), then extension nodes while the budget lasts.
    int left = budget_or(max_draft_budget());
    const int want = std::min({gamma_, max_depth, left});
    if (draft_on_ && want > 0) draft = run_draft(seq, want);
    int parent = 0;
    for (int32_t t : draft) parent = out.add(t, parent, true);
    chain_len_ = static_cast<int>(draft.size());
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

  void shutdown() override {
    if (!pool_state_.empty()) pool_.save(pool_state_);
  }

  std::map<std::string, double> counters() const override {
    return {{"draft_forwards", double(draft_forwards_)},
            {"draft_tokens", double(draft_tokens_)},
            {"draft_tokens_per_forward", draft_forwards_ ? double(draft_tokens_) / draft_forwards_ : 0.0},
            {"draft_proposed", double(proposed_)},
            {"draft_accepted", double(accepted_)},
            {"draft_acceptance", proposed_ ? double(accepted_) / proposed_ : 0.0},
            {"extension_tokens", double(ext_planned_)},
            {"extension_accepted", double(ext_accepted_)},
            {"pool_phrases", double(pool_.size())},
            {"pool_keys", double(pool_.keys())}};
  }

 private:
  struct Ext {
    std::vector<int32_t> phrase;  // as planned (cut at max_depth), phrase[0] = the chain's last token
    std::vector<int32_t> nodes;   // plan nodes of phrase[1..]
  };

  // Syncs the draft with `seq` and returns up to `want` draft tokens following seq.
  std::vector<int32_t> run_draft(const std::vector<int32_t>& seq, int want) {
    const auto& dc = draft_.config();
    const size_t S = seq.size();
    size_t L = 0;
    while (L < S && L < dseq_.size() && dseq_[L] == seq[L]) ++L;
    if (L < S) {  // seq is not a prefix of dseq_: roll the draft back to the common prefix
      const int keep = std::min<int>({draft_.cache_len(), static_cast<int>(L), static_cast<int>(S) - 1});
      if (keep < draft_.cache_len()) draft_.truncate(keep);
      dseq_ = seq;
    }
    auto drafted_eos = [&] {
      for (size_t i = S; i < dseq_.size(); ++i)
        if (dc.is_eos(dseq_[i])) return true;
      return false;
    };
    while (static_cast<int>(dseq_.size() - S) < want && static_cast<int>(dseq_.size()) <= dc.max_positions &&
           !drafted_eos()) {
      const int root_pos = static_cast<int>(dseq_.size()) - 1;
      const int dmax_depth = dc.max_positions - 1 - root_pos;
      lade_->plan(dseq_, dmax_depth, dplan_);
      dplan_.validate();
      const std::vector<int32_t> before = dseq_;
      auto res = dexec_.run(dseq_, dplan_);
      Verdict dv = verify_plan(dplan_, res);
      dseq_.insert(dseq_.end(), dv.tokens.begin(), dv.tokens.end());
      dexec_.commit(dseq_, dv.path);
      lade_->update(before, dplan_, res, dv);
      ++draft_forwards_;
      draft_tokens_ += static_cast<int64_t>(dv.tokens.size());
    }
    std::vector<int32_t> out;
    for (size_t i = S; i < dseq_.size() && static_cast<int>(out.size()) < want; ++i) {
      out.push_back(dseq_[i]);
      if (dc.is_eos(dseq_[i])) break;
    }
    return out;
  }

  StepModel& draft_;
  LocalExecutor dexec_;
  std::unique_ptr<Strategy> lade_;
  int gamma_, K_;
  std::string pool_state_;
  PhrasePool pool_;
  bool draft_on_ = false;
  std::vector<int32_t> dseq_;
  StepPlan dplan_;
  int chain_len_ = 0;
  std::vector<Ext> ext_;
  int64_t draft_forwards_ = 0, draft_tokens_ = 0, proposed_ = 0, accepted_ = 0, ext_planned_ = 0,
          ext_accepted_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_ouroboros_strategy(const StrategyOptions& o, StepModel* draft) {
  LA_CHECK(draft != nullptr, "--strategy ouroboros needs a draft model");
  validate_ouroboros_options(o);
  return std::make_unique<OuroborosStrategy>(o, *draft);
}

// The draft model's LADE flags are checked here under their own names (--draft-window, not --window).
void validate_ouroboros_options(const StrategyOptions& o) {
  LA_CHECK(o.gamma >= 1 && o.gamma <= 256, "--gamma must be in [1, 256] (got ", o.gamma, ")");
  LA_CHECK(o.draft_window >= 1 && o.draft_window <= 256, "--draft-window must be in [1, 256] (got ", o.draft_window,
           ")");
  LA_CHECK(o.draft_ngram >= 2 && o.draft_ngram <= 32, "--draft-ngram must be in [2, 32] (got ", o.draft_ngram, ")");
  LA_CHECK(o.draft_guesses >= 0 && o.draft_guesses <= 256, "--draft-guesses must be in [0, 256] (got ",
           o.draft_guesses, ")");
  LA_CHECK(o.extensions >= 0 && o.extensions <= 64, "--extensions must be in [0, 64] (got ", o.extensions, ")");
  LA_CHECK(o.name != "ouroboros" || !o.draft_model.empty(), "--strategy ouroboros needs --draft-model");
}

}  // namespace la
