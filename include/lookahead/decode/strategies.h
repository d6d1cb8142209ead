// Strategy parameters and factories. No libtorch.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "lookahead/decode/strategy.h"

namespace la {

class StepModel;

struct StrategyOptions {
  std::string name = "ar";  // ar | jacobi | lade | trie | prompt-lookup | ouroboros
  uint64_t seed = 0;        // draft-state randomness (LADE window initialisation)
  // Adaptive drafting (draft_controller.h): each step's draft size is chosen from measured costs and acceptance,
  // the parameters below being upper bounds. Read by the CLI, which then attaches a DraftController.
  bool adaptive = true;

  // jacobi: block of future positions iterated to a fixed point
  int jacobi_block = 16;

  // lade
  int window = 15;   // W
  int ngram = 5;     // N
  int guesses = 15;  // G
  bool pool_from_prompt = false;

  // trie
  int decoding_length = 64;
  int branch_length = 12;
  int trie_capacity = 0;  // node budget; 0 means 32 x decoding_length
  std::string trie_mode = "hierarchical";  // hierarchical | parallel
  std::string trie_state;                  // load at start, save at exit (atomic rename)

  // prompt lookup
  int pl_min_ngram = 1;
  int pl_max_ngram = 4;
  int pl_num_tokens = 10;

  // ouroboros (defaults: the paper's gamma 12, window 20, guesses 20, N 7, K 3)
  std::string draft_model;   // draft model directory (same tokenizer and vocabulary as the target)
  int gamma = 12;            // draft tokens per round
  int draft_window = 20;     // the draft model's LADE window W
  int draft_guesses = 20;    // the draft model's LADE guesses G
  int draft_ngram = 7;       // the draft model's LADE n-gram size N
  int extensions = 3;        // K phrase-pool extensions verified at the draft's end
  std::string pool_state;    // phrase pool file: loaded at start (corrupt: refused), saved atomically at exit

  // Checks the strategy name, then every strategy's options (validate_*_options below): throws la::Error naming
  // the first invalid flag.
  void validate() const;
};

// Each strategy's own option check, defined next to its implementation: one la::Error per bad value, naming the
// flag (--window, --draft-window, ...). Its factory calls it too. Ouroboros also needs --draft-model when selected.
void validate_ar_options(const StrategyOptions& opt);
void validate_jacobi_options(const StrategyOptions& opt);
void validate_lade_options(const StrategyOptions& opt);
void validate_trie_options(const StrategyOptions& opt);
void validate_prompt_lookup_options(const StrategyOptions& opt);
void validate_ouroboros_options(const StrategyOptions& opt);

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& opt, StepModel* draft_model = nullptr);

// Individual factories (one translation unit each).
std::unique_ptr<Strategy> make_ar_strategy();
std::unique_ptr<Strategy> make_jacobi_strategy(const StrategyOptions& opt);
std::unique_ptr<Strategy> make_lade_strategy(const StrategyOptions& opt);
std::unique_ptr<Strategy> make_trie_strategy(const StrategyOptions& opt);
std::unique_ptr<Strategy> make_prompt_lookup_strategy(const StrategyOptions& opt);
std::unique_ptr<Strategy> make_ouroboros_strategy(const StrategyOptions& opt, StepModel* draft_model);

}  // namespace la
