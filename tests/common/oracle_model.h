// An oracle StepModel for CPU tests (in the spirit of TensorRT-LLM's RandomLlm): a small vocabulary, no weights,
// and a next token that is a known function (a Rule) of each node's own ancestor chain: the committed tokens, its
// ancestors in the step and itself, chain[p] being the token at position p. So the output of a node depends on
// its parents and never on plan order; positions are checked against the chain (a wrong one throws la::Error), so
// an executor or strategy that gets positions or parents wrong fails the test. Greedy only.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "lookahead/model/step_model.h"
#include "lookahead/util/error.h"

namespace la::test {

using Rule = std::function<int32_t(const std::vector<int32_t>& chain)>;

class OracleModel : public StepModel {
 public:
  OracleModel(int vocab, int max_positions, Rule rule, std::vector<int> eos = {}) : rule_(std::move(rule)) {
    cfg_.vocab = vocab;
    cfg_.max_positions = max_positions;
    cfg_.eos_ids = std::move(eos);
    cache_.reserve(static_cast<size_t>(max_positions));  // commits never allocate (the allocation test)
  }
  const ModelConfig& config() const override { return cfg_; }
  int cache_len() const override { return static_cast<int>(cache_.size()); }
  std::vector<int32_t> forward(const StepInput& in, const SampleParams&, std::vector<float>* logits) override {
    if (scope_) scope_(true);
    LA_CHECK(logits == nullptr, "oracle: no logits");
    const int n = static_cast<int>(in.tokens.size());
    std::vector<int32_t> out(n);
    std::vector<int32_t> chain, rev;
    for (int i = 0; i < n; ++i) {
      rev.clear();
      for (int a = i; a >= 0; a = in.parents[a]) {
        LA_CHECK(in.parents[a] < a, "oracle: parent of step token ", a, " is not earlier");
        rev.push_back(a);
      }
      chain.assign(cache_.begin(), cache_.end());
      for (auto it = rev.rbegin(); it != rev.rend(); ++it) {
        LA_CHECK(in.positions[*it] == static_cast<int>(chain.size()), "oracle: step token ", *it, " at position ",
                 in.positions[*it], " but its ancestor chain puts it at ", chain.size());
        chain.push_back(in.tokens[*it]);
      }
      LA_CHECK(static_cast<int>(chain.size()) <= cfg_.max_positions, "oracle: position beyond the context");
      out[i] = rule_(chain);
    }
    last_ = in;
    ++forwards_;
    if (scope_) scope_(false);
    return out;
  }
  void commit(const std::vector<int32_t>& idx) override {
    int prev = -1;
    for (int32_t i : idx) {
      LA_CHECK(i >= 0 && i < static_cast<int>(last_.tokens.size()), "oracle: commit index out of range");
      LA_CHECK(last_.parents[i] == prev, "oracle: committed tokens are not a chain");
      cache_.push_back(last_.tokens[i]);
      prev = i;
    }
  }
  void truncate(int len) override {
    if (len < cache_len()) cache_.resize(len);
  }
  uint64_t checksum() const override { return 0; }
  std::string describe() const override { return "oracle"; }
  // A replica with the same rule and an empty cache (a batch slot); it reports to the same scope callback.
  std::unique_ptr<StepModel> fork() const override {
    auto m = std::make_unique<OracleModel>(cfg_.vocab, cfg_.max_positions, rule_, cfg_.eos_ids);
    m->scope_ = scope_;
    return m;
  }
  int forwards() const { return forwards_; }
  // Called with true when a forward starts and false when it ends (the allocation test does not count the
  // model's own allocations: a real model's forward allocates tensors anyway).
  void set_scope(std::function<void(bool)> f) { scope_ = std::move(f); }

 private:
  ModelConfig cfg_;
  Rule rule_;
  std::vector<int32_t> cache_;
  StepInput last_;
  int forwards_ = 0;
  std::function<void(bool)> scope_;
};

// A tiny language model of a cyclic text: after the pair (a, b) comes the token that follows that pair in the
// cycle; for a pair not in it, the token after b's first occurrence (back-off); for a token outside it, cycle[0].
// Any context continues the cycle, as a real model continues text, and the previous token matters where the
// cycle repeats a token (2 3 2 4 ...: after 2 comes 3 or 4).
inline Rule cycle_rule(std::vector<int32_t> cycle) {
  std::map<std::pair<int32_t, int32_t>, int32_t> pair;
  std::map<int32_t, int32_t> single;
  const size_t n = cycle.size();
  for (size_t i = 0; i < n; ++i) {
    pair.emplace(std::make_pair(cycle[i], cycle[(i + 1) % n]), cycle[(i + 2) % n]);
    single.emplace(cycle[i], cycle[(i + 1) % n]);
  }
  return [pair, single, first = cycle[0]](const std::vector<int32_t>& c) {
    const int32_t b = c.back();
    if (c.size() >= 2) {
      auto it = pair.find({c[c.size() - 2], b});
      if (it != pair.end()) return it->second;
    }
    auto it = single.find(b);
    return it != single.end() ? it->second : first;
  };
}

// A model that knows a script by position: the token after position p is script[p + 1] whatever the context
// (script beyond its end: `junk`). It ignores its parents; Jacobi's test uses it, a fixed point by position.
inline Rule position_rule(std::vector<int32_t> script, int32_t junk) {
  return [script, junk](const std::vector<int32_t>& c) {
    return c.size() < script.size() ? script[c.size()] : junk;
  };
}

}  // namespace la::test
