// The step interface every decoding strategy is served by. No libtorch here.
//
// A step is a set of new tokens on top of the committed KV cache. Token i has an explicit position and a parent
// index among the step's tokens (-1: it attends to the committed cache only). Each token attends to the whole
// committed cache plus its ancestors in the step (itself included): a chain is plain decoding, a tree is a
// multi-branch draft. After a step, `commit` appends a chosen list of the step's tokens (a root-to-node path, in
// order) to the cache; everything else computed in the step is dropped.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/model/config.h"

namespace la {

struct StepInput {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> parents;  // parents[i] < i, or -1
  // Rows before it choose no next token: no caller reads their result (-1 from TorchLlama), and the CPU kernels skip
  // their final norm and logits (the LM head is
  // 21% of a SmolLM2 row's multiply-adds, 60% of a Gemma-3-270M row's). Prefill sets it to the step's size (no
  // prompt row's next token is read: the last prompt token is the first step's root), a step with a pending chain
  // to the chain's last row. Asking for the step's logits (forward's `logits`) computes every row's anyway.
  int32_t first_output = 0;

  // A chain (plain decoding, prefill): tokens at positions start, start+1, ..., each the child of the one before.
  static StepInput chain(const std::vector<int32_t>& tokens, int32_t start);
};

// How each step token's "next token" is chosen. temperature <= 0 means greedy (argmax).
// Sampling is position-keyed: the uniform variate for the token at absolute position p is a hash of
// (seed, stream, p). So every strategy, on any number of ranks, draws the same variate for the same position,
// which makes verification of deterministic drafts exact (and outputs reproducible).
struct SampleParams {
  float temperature = 0.f;
  int top_k = 0;        // 0: off
  float top_p = 1.f;    // 1: off
  uint64_t seed = 0;
  uint64_t stream = 0;  // per-request stream id
  bool greedy() const { return temperature <= 0.f; }
};

class StepModel;

// One request's part of a batched step (StepModel::forward_batch): a replica of the model with its own KV cache
// (the model itself or a fork() of it), the step on top of that cache, its sampling parameters, and its results.
struct BatchItem {
  StepModel* model = nullptr;
  const StepInput* in = nullptr;
  const SampleParams* sp = nullptr;
  std::vector<int32_t>* out = nullptr;  // resized to the step's tokens: the chosen next token after each
  std::vector<float>* logits = nullptr;  // if non-null: the step's T*vocab fp32 logits (tests)
};

// Runs `tokens` as one chain after the committed cache and commits them all (prefill).
void append_chain(StepModel& m, const std::vector<int32_t>& tokens);

// Uniform variate in [0,1) for the token at absolute position `pos`.
double position_uniform(uint64_t seed, uint64_t stream, int64_t pos);

class StepModel {
 public:
  virtual ~StepModel() = default;
  virtual const ModelConfig& config() const = 0;
  // Committed tokens in the KV cache.
  virtual int cache_len() const = 0;
  // Runs one forward over the step. Returns, for every step token, the chosen next token (argmax or
  // position-keyed sample, see SampleParams). If `logits` is non-null it receives T*vocab fp32 logits.
  virtual std::vector<int32_t> forward(const StepInput& step, const SampleParams& sp,
                                       std::vector<float>* logits = nullptr) = 0;
  // Several replicas' steps as one forward where the backend can (the CPU and the CUDA kernels: every GEMM over all
  // rows at once; the ATen reference runs one forward each, its GEMM not being batch-invariant). Every item's model must be this model or a fork of it. Each item's results are exactly those of
  // item.model->forward(*in, *sp) alone: the kernels are batch-invariant, so a request's tokens do not depend on
  // its neighbours. Afterwards each item's model commits as after its own forward. Default: one forward each.
  virtual void forward_batch(const BatchItem* items, int n) {
    for (int i = 0; i < n; ++i) *items[i].out = items[i].model->forward(*items[i].in, *items[i].sp, items[i].logits);
  }
  // Appends the K/V of the given tokens of the last step (indices into it, in order) to the cache.
  virtual void commit(const std::vector<int32_t>& step_indices) = 0;
  // Sizes the KV cache for `rows` rows now (an empty cache only; a batch slot at admission), so that no step of
  // the request grows it. Default: nothing (the cache grows on demand).
  virtual void reserve_cache(int rows) { (void)rows; }
  // Drops committed tokens past `len`.
  virtual void truncate(int len) = 0;
  // Weight checksum (for cross-rank agreement checks).
  virtual uint64_t checksum() const = 0;
  virtual std::string describe() const = 0;
  // A model sharing these weights with an empty KV cache of its own (one more replica at the cost of a cache;
  // used by the lookahead-parallelism simulation). nullptr: this model cannot be forked.
  virtual std::unique_ptr<StepModel> fork() const { return nullptr; }
};

}  // namespace la
