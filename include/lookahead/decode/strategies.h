// The strategy registry: every --strategy in one table of {name, help, flags, validate, make}, one small options
// struct per strategy. No libtorch, no Boost here (the CLI binds flags through StrategyFlags).
//
// Adding a strategy: its options struct below (and a member of StrategyOptions), its translation unit defining
// its row (*_strategy_info: name, help, add_*_flags, validate_*_options, the factory and any set-up hooks), and
// the row's place in strategies.cpp's list. Nothing else holds a strategy's name: Strategy::name(), --help, the
// error for an unknown name, the CLI's flags and its set-up (draft model, model identity, state files) all read
// the row.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/decode/strategy.h"

namespace la {

class StepModel;

struct JacobiOptions {
  int block = 16;  // --jacobi-block: guessed future positions iterated to a fixed point
};

struct LadeOptions {
  int window = 15;   // W
  int ngram = 5;     // N
  int guesses = 15;  // G
  bool pool_from_prompt = false;
};

struct TrieOptions {
  int decoding_length = 64;
  int branch_length = 12;
  int capacity = 0;                   // node budget; 0 means 32 x decoding_length
  std::string mode = "hierarchical";  // hierarchical | parallel
  std::string state;                  // load at start, save by checkpoint() (atomic rename)
  bool state_read_only = false;  // not a flag: load the state file, never write it (CLI: another group's owner)
};

struct PromptLookupOptions {
  int min_ngram = 1;
  int max_ngram = 4;
  int num_tokens = 10;
};

// Ouroboros (defaults: the paper's gamma 12, window 20, guesses 20, N 7, K 3). The draft model runs LADE with
// `lade` (flags --draft-window, --draft-ngram, --draft-guesses).
struct OuroborosOptions {
  std::string draft_model;  // draft model directory (same tokenizer and vocabulary as the target)
  int gamma = 12;           // draft tokens per round
  LadeOptions lade{20, 7, 20, false};
  int extensions = 3;       // K phrase-pool extensions verified at the draft's end
  std::string pool_state;   // phrase pool file: loaded at start (corrupt: refused), saved atomically by checkpoint()
  bool state_read_only = false;  // not a flag: load the state file, never write it (CLI: another group's owner)
};

// SuffixDecoding-style drafting (strategy_suffix.cpp, draft/suffix_tree.h).
struct SuffixOptions {
  int max_tokens = 32;      // --suffix-max-tokens: draft nodes per step (the controller's budget caps it)
  int depth = 32;           // --suffix-depth: tree depth; matches use up to depth/2 tokens, drafts the rest
  double factor = 2.0;      // --suffix-factor: a draft holds at most factor x match length nodes
  double min_prob = 0.1;    // --suffix-min-prob: nodes whose path probability is below this are cut
  int64_t global_mb = 64;   // --suffix-global-mb: the global tree's memory bound (0: no global tree)
  std::string state;        // --suffix-state: the global tree, loaded at start, saved atomically by checkpoint()
  bool state_read_only = false;  // not a flag: load the state file, never write it (CLI: another group's owner)
  // Not flags: the identity a state file must match, set by the CLI from the loaded model (0: not checked).
  int32_t vocab_size = 0;
  uint64_t model_id = 0;
};

struct StrategyOptions {
  // A name of the registry (strategy_registry()). The default drafts: suffix decoding with the adaptive controller
  // measured best of the strategies on every real set (README: 1.44-1.61x plain on code and math, about 1.0x on
  // chat), and the controller's ledger keeps it within a few percent of plain decoding where drafts do not pay
  // (draft_controller.h). `--strategy ar` is plain decoding.
  std::string name = "suffix";
  uint64_t seed = 0;        // draft-state randomness (LADE window initialisation)
  // Adaptive drafting (draft_controller.h): each step's draft size is chosen from measured costs and acceptance,
  // the parameters below being upper bounds. Read by the CLI, which then attaches a DraftController.
  bool adaptive = true;

  JacobiOptions jacobi;
  LadeOptions lade;
  TrieOptions trie;
  PromptLookupOptions pl;
  OuroborosOptions ouroboros;
  SuffixOptions suffix;

  // Checks the strategy name, then every strategy's options (each registry row's validate): throws la::Error
  // naming the first invalid flag. A bad value is refused even for a strategy not selected.
  void validate() const;
};

// Where a strategy declares its flags; the CLI implements it with Boost.Program_options. The value's current
// content is the flag's default (the options struct's member initialisers are the one place defaults live).
class StrategyFlags {
 public:
  virtual ~StrategyFlags() = default;
  virtual void add(const std::string& flag, int* v, const std::string& help) = 0;
  virtual void add(const std::string& flag, int64_t* v, const std::string& help) = 0;
  virtual void add(const std::string& flag, double* v, const std::string& help) = 0;
  virtual void add(const std::string& flag, std::string* v, const std::string& help) = 0;
  virtual void add_switch(const std::string& flag, bool* v, const std::string& help) = 0;
};

// What a strategy may bind to from the loaded target model (the suffix state file's identity). `hash` is called
// only by a strategy that needs it (it reads the weights and the tokenizer files).
struct ModelIdentity {
  int32_t vocab = 0;
  std::function<uint64_t()> hash;
};

struct StrategyInfo {
  const char* name;
  const char* help;  // one line: what it drafts
  void (*flags)(StrategyFlags&, StrategyOptions&);
  void (*validate)(const StrategyOptions&);
  // `draft_model` is only used by strategies that need one (ouroboros); others ignore it.
  std::unique_ptr<Strategy> (*make)(const StrategyOptions&, StepModel* draft_model);
  // Set-up hooks, null where a strategy has none; the CLI calls them through the functions below.
  // The directory of a second model the strategy drafts with (ouroboros' --draft-model), loaded by the CLI.
  std::string (*draft_model)(const StrategyOptions&) = nullptr;
  // Binds the options to the loaded target model (suffix: the identity its state file must match).
  void (*bind_model)(StrategyOptions&, const ModelIdentity&) = nullptr;
  // Makes the state files read-only, for a group owner that loads them but leaves the writing to world rank 0 (one
  // writer per file; rank 0's state learns every group's requests).
  void (*read_only_state)(StrategyOptions&) = nullptr;
};

// The table, in --help order.
const std::vector<StrategyInfo>& strategy_registry();
// The row of `name`, or null.
const StrategyInfo* find_strategy(const std::string& name);
// "ar | jacobi | ..." (for --help).
std::string strategy_names(const char* sep = " | ");

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& opt, StepModel* draft_model = nullptr);

// The selected strategy's draft model directory ("" when it uses none).
std::string strategy_draft_model(const StrategyOptions& opt);
// The selected strategy's bind_model hook, if any.
void bind_strategy_model(StrategyOptions& opt, const ModelIdentity& id);
// Every strategy's read_only_state hook (a group owner other than world rank 0).
void read_only_strategy_state(StrategyOptions& opt);

// Each strategy's row, defined with its implementation (strategy_*.cpp).
const StrategyInfo& ar_strategy_info();
const StrategyInfo& jacobi_strategy_info();
const StrategyInfo& lade_strategy_info();
const StrategyInfo& trie_strategy_info();
const StrategyInfo& prompt_lookup_strategy_info();
const StrategyInfo& ouroboros_strategy_info();
const StrategyInfo& suffix_strategy_info();

// Each strategy's flags, option check (one la::Error per bad value, naming the flag) and factory, defined next
// to its implementation. The factories validate too.
void add_jacobi_flags(StrategyFlags& f, StrategyOptions& o);
void add_lade_flags(StrategyFlags& f, StrategyOptions& o);
void add_trie_flags(StrategyFlags& f, StrategyOptions& o);
void add_prompt_lookup_flags(StrategyFlags& f, StrategyOptions& o);
void add_ouroboros_flags(StrategyFlags& f, StrategyOptions& o);
void add_suffix_flags(StrategyFlags& f, StrategyOptions& o);
// LADE's three sizes under a flag prefix ("" for lade, "draft-" for Ouroboros' draft model): one check for both.
void add_lade_size_flags(StrategyFlags& f, LadeOptions& l, const std::string& prefix, const std::string& who);
void validate_lade_sizes(const LadeOptions& l, const std::string& prefix);

void validate_ar_options(const StrategyOptions& opt);
void validate_jacobi_options(const StrategyOptions& opt);
void validate_lade_options(const StrategyOptions& opt);
void validate_trie_options(const StrategyOptions& opt);
void validate_prompt_lookup_options(const StrategyOptions& opt);
void validate_ouroboros_options(const StrategyOptions& opt);
void validate_suffix_options(const StrategyOptions& opt);

std::unique_ptr<Strategy> make_ar_strategy();
std::unique_ptr<Strategy> make_jacobi_strategy(const StrategyOptions& opt);
std::unique_ptr<Strategy> make_lade_strategy(const StrategyOptions& opt);
std::unique_ptr<Strategy> make_trie_strategy(const StrategyOptions& opt);
std::unique_ptr<Strategy> make_prompt_lookup_strategy(const StrategyOptions& opt);
std::unique_ptr<Strategy> make_ouroboros_strategy(const StrategyOptions& opt, StepModel* draft_model);
std::unique_ptr<Strategy> make_suffix_strategy(const StrategyOptions& opt);

}  // namespace la
