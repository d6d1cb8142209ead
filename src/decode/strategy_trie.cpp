// Lookahead (Zhao et al., KDD'24) trie strategy: one process-wide token trie serves every request.
//
// * begin_request(prompt): a new request id; every prompt window prompt[i, i+branch_length) (tails included) is
//   inserted as a prompt branch of that request.
// * plan(seq): the trie drafts up to decoding_length continuations of seq.back() (multi-stage query on seq's
//   last tokens), as a prefix-merged tree (hierarchical) or disjoint chains (parallel), never deeper than
//   max_depth; every node is a draft node.
// * update(): each generated-output window seq[s, s+branch_length) is inserted as a generated branch as soon as
//   it is complete (s runs from the first window holding an output token); end_request() inserts the
//   remaining shorter tail windows and then eliminates the request's prompt frequency.
// * State: the constructor loads opt.trie.state if that file exists (a corrupt/truncated/wrong-magic file is an
//   error: la::Error naming the file propagates, the strategy refuses to start); a missing file starts cold.
//   checkpoint() saves to opt.trie.state (atomic rename) when a request ran since the last save.
// * Capacity: opt.trie.capacity nodes, or 32 x decoding_length when 0.
#include <algorithm>
#include <filesystem>

#include "lookahead/decode/state_checkpoint.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/draft/trie.h"
#include "lookahead/util/error.h"

namespace la {

namespace {

class TrieStrategy : public Strategy {
 public:
  // The trie and its state file, shared by the strategies spawned for a batch (one trie learns from every request).
  struct Shared {
    Shared(const TrieOptions& o) : trie(params_of(o)), state(o.state, !o.state_read_only) {}
    TokenTrie trie;
    StateCheckpoint state;
    size_t loaded_nodes = 0;
    int64_t next_request = 0;
  };

  explicit TrieStrategy(const StrategyOptions& opt) : TrieStrategy(opt.trie, std::make_shared<Shared>(opt.trie)) {
    if (!opt_.state.empty()) {
      std::error_code ec;
      if (std::filesystem::exists(opt_.state, ec)) {
        trie_.load(opt_.state);
        loaded_nodes_ = trie_.size();
      } else if (ec) {
        fail("trie state file '", opt_.state, "': cannot check it: ", ec.message());
      }
    }
  }

  TrieStrategy(const TrieOptions& o, std::shared_ptr<Shared> sh)
      : opt_(o), mode_(parse_trie_mode(o.mode)), sh_(std::move(sh)), trie_(sh_->trie), state_(sh_->state),
        loaded_nodes_(sh_->loaded_nodes), next_request_(sh_->next_request) {
    // Every budget up to decoding_length plans without allocating (the batch's cap and the controllers choose
    // budgets mid-request): the draft and the trie's retrieval scratch are sized for the largest once.
    const int most = std::max(0, opt_.decoding_length);
    draft_.tokens.reserve(static_cast<size_t>(most));
    draft_.parents.reserve(static_cast<size_t>(most));
    trie_.reserve_retrieval(most);
  }

  std::string name() const override { return trie_strategy_info().name; }
  std::unique_ptr<Strategy> spawn(int) override { return std::make_unique<TrieStrategy>(opt_, sh_); }

  void begin_request(const std::vector<int32_t>& prompt) override {
    if (active_) {  // the previous request never ended: drop its prompt frequency, keep what it inserted
      if (request_ >= 0) trie_.end_request(request_);
      active_ = false;
    }
    active_ = true;
    state_.changed();  // prompt windows may prune generated nodes at capacity; the output adds its own
    request_ = next_request_++;
    prompt_len_ = prompt.size();
    trie_.insert_windows(prompt, BranchSource::from_prompt(request_));
    // The first window holding an output token starts at prompt_len - branch_length + 1.
    const size_t b = static_cast<size_t>(opt_.branch_length);
    next_window_ = prompt_len_ >= b ? prompt_len_ - b + 1 : 0;
    ++requests_;
  }

  void plan(const std::vector<int32_t>& seq, int max_depth, StepPlan& out) override {
    LA_CHECK(!seq.empty(), "trie: empty sequence");
    out.reset(seq.back());
    const int len = budget_or(opt_.decoding_length);
    if (len <= 0 || max_depth <= 0) return;
    trie_.retrieve(seq.data(), seq.size(), len, max_depth, mode_, draft_);
    for (int i = 0; i < draft_.size(); ++i) out.add(draft_.tokens[i], draft_.parents[i] + 1, true);
    draft_nodes_ += static_cast<uint64_t>(draft_.size());
    ++steps_;
  }

  void update(const std::vector<int32_t>& seq, const StepPlan& plan, const std::vector<int32_t>& results,
              const Verdict& verdict) override {
    accepted_ += verdict.path.size() > 0 ? verdict.path.size() - 1 : 0;
    state_.changed();
    const size_t b = static_cast<size_t>(opt_.branch_length);
    const size_t old = seq.size();
    const size_t total = old + verdict.tokens.size();
    auto at = [&](size_t j) { return j < old ? seq[j] : verdict.tokens[j - old]; };
    if (!active_) {  // no begin_request: treat the whole sequence as output
      active_ = true;
      request_ = -1;
      next_window_ = 0;
    }
    while (next_window_ + b <= total) {
      window_.clear();
      for (size_t j = next_window_; j < next_window_ + b; ++j) window_.push_back(at(j));
      trie_.insert_branch(window_, BranchSource::generated());
      ++next_window_;
    }
  }

  void end_request(const std::vector<int32_t>& seq) override { finish(seq); }

  // Another group's request: every window holding an output token goes in as a generated branch, as update() and
  // finish() insert this strategy's own (its prompt branches never were in this trie, so there is nothing to
  // eliminate). The request in flight keeps its own windows and prompt branches.
  void learn(const std::vector<int32_t>& seq, size_t prompt_len) override {
    if (seq.size() <= prompt_len) return;
    const size_t b = static_cast<size_t>(std::max(opt_.branch_length, 1));
    std::vector<int32_t> w;
    for (size_t s = prompt_len >= b ? prompt_len - b + 1 : 0; s < seq.size(); ++s) {
      w.assign(seq.begin() + static_cast<std::ptrdiff_t>(s),
               seq.begin() + static_cast<std::ptrdiff_t>(std::min(s + b, seq.size())));
      trie_.insert_branch(w, BranchSource::generated());
    }
    state_.changed();
    ++learned_;
  }

  // Retrieval is best-first by frequency and emits nodes in selection order, so a shorter decoding length keeps
  // the most frequent nodes: the prefix the acceptance model assumes.
  int max_draft_budget() const override { return std::max(0, opt_.decoding_length); }

  void checkpoint() override {
    state_.write_if_changed([this](const std::string& path) { trie_.save(path); });
  }

  std::map<std::string, double> counters() const override {
    std::map<std::string, double> c = {
        {"trie_nodes", static_cast<double>(trie_.size())},
        {"trie_capacity", static_cast<double>(trie_.params().capacity)},
        {"trie_loaded_nodes", static_cast<double>(loaded_nodes_)},
        {"trie_prune_passes", static_cast<double>(trie_.prune_passes())},
        {"trie_decay_rounds", static_cast<double>(trie_.decay_rounds())},
        {"trie_requests", static_cast<double>(requests_)},
        {"trie_mean_draft_nodes", steps_ ? static_cast<double>(draft_nodes_) / static_cast<double>(steps_) : 0.0},
        {"trie_accepted_drafts", static_cast<double>(accepted_)},
        {"trie_learned_requests", static_cast<double>(learned_)}};
    state_.add_counters(c, "trie");
    return c;
  }

 private:
  static TrieParams params_of(const TrieOptions& opt) {
    TrieParams p;
    p.branch_length = opt.branch_length;
    p.capacity = opt.capacity > 0 ? static_cast<size_t>(opt.capacity)
                                       : 32 * static_cast<size_t>(std::max(opt.decoding_length, 0));
    return p;
  }

  // Inserts the output's remaining (shorter) tail windows and removes the request's prompt frequency.
  void finish(const std::vector<int32_t>& seq) {
    if (!active_) return;
    state_.changed();
    // Only windows holding an output token (seq beyond the prompt).
    for (size_t s = next_window_; seq.size() > prompt_len_ && s < seq.size(); ++s) {
      window_.assign(seq.begin() + static_cast<std::ptrdiff_t>(s), seq.end());
      trie_.insert_branch(window_, BranchSource::generated());
    }
    if (request_ >= 0) trie_.end_request(request_);
    active_ = false;
    next_window_ = 0;
    prompt_len_ = 0;
  }

  TrieOptions opt_;
  TrieMode mode_;
  std::shared_ptr<Shared> sh_;
  TokenTrie& trie_;
  StateCheckpoint& state_;
  size_t& loaded_nodes_;
  int64_t& next_request_;
  TrieDraft draft_;
  std::vector<int32_t> window_;
  bool active_ = false;
  int64_t request_ = -1;
  size_t prompt_len_ = 0, next_window_ = 0;
  uint64_t requests_ = 0, steps_ = 0, draft_nodes_ = 0, accepted_ = 0;
  uint64_t learned_ = 0;  // other groups' requests added by learn()
};

}  // namespace

std::unique_ptr<Strategy> make_trie_strategy(const StrategyOptions& opt) {
  validate_trie_options(opt);
  return std::make_unique<TrieStrategy>(opt);
}

void add_trie_flags(StrategyFlags& f, StrategyOptions& o) {
  f.add("decoding-length", &o.trie.decoding_length, "trie: draft tokens per step");
  f.add("branch-length", &o.trie.branch_length, "trie: branch length");
  f.add("trie-capacity", &o.trie.capacity, "trie: node budget (0: 32 x decoding length)");
  f.add("trie-mode", &o.trie.mode, "trie: hierarchical | parallel");
  f.add("trie-state", &o.trie.state, "trie: state file loaded at start, saved atomically after every finished request");
}

void validate_trie_options(const StrategyOptions& so) {
  const TrieOptions& o = so.trie;
  LA_CHECK(o.decoding_length >= 0 && o.decoding_length <= 1024, "--decoding-length must be in [0, 1024] (got ",
           o.decoding_length, ")");
  LA_CHECK(o.branch_length >= 1 && o.branch_length <= 256, "--branch-length must be in [1, 256] (got ",
           o.branch_length, ")");
  LA_CHECK(o.capacity >= 0, "--trie-capacity must be >= 0 (got ", o.capacity, ")");
  LA_CHECK(o.mode == "hierarchical" || o.mode == "parallel", "invalid --trie-mode '", o.mode,
           "' (expected hierarchical or parallel)");
}

const StrategyInfo& trie_strategy_info() {
  static const StrategyInfo row{"trie", "the Alipay trie over prompts and earlier outputs, best-first by frequency",
                                add_trie_flags, validate_trie_options,
                                [](const StrategyOptions& o, StepModel*) { return make_trie_strategy(o); },
                                nullptr, nullptr, [](StrategyOptions& o) { o.trie.state_read_only = true; }};
  return row;
}

}  // namespace la
