// Set-up of a `generate` run on every rank: the communicator and this rank's role, the tokenizer and model
// config (before any weights, so bad prompts fail fast), the weights (the draft model's too, on rank 0), the
// ranks' agreement on weights and parameters, the hand-off of ranks > 0 to the worker loop, and on rank 0 the
// strategy and adaptive drafting. The executor itself is built in run_executor.h.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generate_options.h"
#include "lookahead/decode/cost_model.h"
#include "lookahead/decode/draft_controller.h"
#include "lookahead/decode/generator.h"
#include "lookahead/model/model_dir.h"
#include "lookahead/model/step_model.h"
#include "lookahead/tokenizer/tokenizer.h"
#include "lookahead/dist/comm.h"
#include "lookahead/dist/comm_group.h"
#include "lookahead/parallel/parallel_executor.h"

namespace la::cli {

struct RunExecutor;

struct Ranks {
  std::unique_ptr<Comm> comm;  // every rank of the job (the world)
  std::unique_ptr<Comm> own;   // this rank's group when the job has several (split_groups), else null
  Comm* group = nullptr;       // this rank's lookahead-parallel group: `own`, or `comm` with one group
  bool root = true;      // world rank 0: the request queue, --output, the summary (and the owner of group 0)
  bool owner = true;     // the group's first rank: runs the strategy and the request loop of its group
  int lp = 1;            // ranks per group (--lp-size)
  int groups = 1;        // world size / lp
  std::vector<int> owners;  // owners[g]: world rank of group g's owner (g * lp)
  bool rank_log = true;  // per-rank log lines (load, device): not --quiet
  std::string tag;       // log prefix: "[lookahead] ", or "[rank R] " in multi-rank jobs
};

// Creates the communicator (collective), checks --simulate-ranks against the job, places this rank on its CUDA
// device, and makes ranks > 0 quiet (o.quiet).
Ranks open_ranks(GenerateOptions& o);
// --lp-size: splits the job into groups of K consecutive ranks (collective; before any model is loaded). auto: one
// group of all ranks for --prompt, groups of 1 for --input. A world size K does not divide is one error (printed
// by rank 0 alone; the other ranks wait to be ended with it). Every owner loads --trie-state, --suffix-state and
// --pool-state; only world rank 0 writes them (one writer per file), its state holding every group's requests.
void split_groups(Ranks& r, GenerateOptions& o);

struct Models {
  ModelConfig cfg;                 // from the model files, read before the weights
  std::optional<ModelDir> tokenizer_files;  // the tokenizer's and the chat template's (cli.h: tokenizer_files)
  std::unique_ptr<Tokenizer> tok;  // as `tokenize` opens it
  std::unique_ptr<StepModel> model;
  std::unique_ptr<StepModel> draft;  // ouroboros, rank 0 only
};

// The config and the tokenizer, no weights (a bad config fails before anything large is read).
Models open_model_files(const GenerateOptions& o);
// The target's weights, and the draft model's for a strategy that drafts with one (its registry row's draft_model
// hook: ouroboros; only rank 0 runs the strategy), after checking that the draft shares the target's vocabulary
// and tokenizer files.
void load_weights(Models& m, const GenerateOptions& o, bool root);
// The selected strategy's bind_model hook (suffix: its state file belongs to one model and tokenizer, so the
// vocabulary size and, with --suffix-state, a hash of the weights and tokenizer files go into its options).
void set_strategy_identity(GenerateOptions& o, const Models& m);
// Every rank must hold the same weights and run with the same parameters (one rank: nothing to compare).
void check_ranks_agree(Comm& comm, const StepModel& model, const GenerateOptions& o, size_t prompts);
// --rank-timeout and the stop-signal hand-over between ranks (a worker's signal stops rank 0 cleanly), and
// rank 0's executor options (the simulation's collective latency and per-step table).
struct RankOptions {
  CommGroupOptions group;
  ParallelOptions par;
};
// `group`: the group's communicator (errors name its ranks by their world rank).
RankOptions rank_options(const GenerateOptions& o, const std::string& tag, const Comm* group = nullptr);
// A group's ranks other than its owner: serve the owner's steps until it shuts the group down.
void serve_rank_zero(Comm& comm, StepModel& model, const CommGroupOptions& opt, const Ranks& r);

// "model ... loaded in X s; strategy S[; K ranks, backend]" on stderr.
void print_loaded(const Ranks& r, const StepModel& model, const Strategy& strategy, bool adaptive, double load_s);

// Adaptive drafting: a forward cost model calibrated here and kept current by the executor, and the controller
// that picks each step's budget. Both null with --adaptive off or a strategy that never drafts.
struct Adaptive {
  std::unique_ptr<StepCostModel> cost;
  std::unique_ptr<DraftController> controller;
};
// `batch`: requests in flight; the cost model is then calibrated up to the rows a batched step can hold.
// `known`: an earlier calibration of this model (--batch auto's), whose buckets are not timed again.
Adaptive attach_adaptive(const GenerateOptions& o, StepModel& model, Strategy& strategy, RunExecutor& exec,
                         Generator& gen, int batch = 1, const ForwardCostModel* known = nullptr);

}  // namespace la::cli
