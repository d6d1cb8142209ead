// A test "model" for executor tests without libtorch (test_partition.cpp, test_parallel_executor.cpp).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "lookahead/model/step_model.h"

namespace la::test {

// A "model" whose next token depends on the whole context (tokens and positions), so a replica with a wrong cache
// gives wrong results. Small vocabulary so drafts are accepted often.
class HashModel : public StepModel {
 public:
  explicit HashModel(int vocab) { cfg_.vocab = vocab; }
  const ModelConfig& config() const override { return cfg_; }
  int cache_len() const override { return static_cast<int>(cache_.size()); }
  std::vector<int32_t> forward(const StepInput& s, const SampleParams&, std::vector<float>*) override {
    const int T = static_cast<int>(s.tokens.size());
    step_h_.assign(T, 0);
    step_ = s;
    std::vector<int32_t> out(T);
    for (int i = 0; i < T; ++i) {
      const uint64_t prev = s.parents[i] < 0 ? (cache_.empty() ? 0x9e37 : cache_.back()) : step_h_[s.parents[i]];
      if (s.parents[i] < 0) EXPECT_EQ(s.positions[i], cache_len());
      else EXPECT_EQ(s.positions[i], s.positions[s.parents[i]] + 1);
      step_h_[i] = mix(prev, s.tokens[i], s.positions[i]);
      out[i] = static_cast<int32_t>((step_h_[i] >> 17) % cfg_.vocab);
    }
    tokens_fed_ += T;
    return out;
  }
  void commit(const std::vector<int32_t>& idx) override {
    int last = -1;
    for (int32_t i : idx) {
      // Committed tokens must form a chain continuing the cache.
      EXPECT_EQ(step_.parents[i], last) << "commit of a non-chain";
      EXPECT_EQ(step_.positions[i], cache_len());
      cache_.push_back(step_h_[i]);
      last = i;
    }
  }
  void truncate(int len) override { cache_.resize(std::min<size_t>(cache_.size(), len)); }
  uint64_t checksum() const override { return 1; }
  std::string describe() const override { return "hash"; }
  long tokens_fed_ = 0;

 private:
  static uint64_t mix(uint64_t h, int32_t tok, int32_t pos) {
    h ^= static_cast<uint64_t>(tok) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(pos) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return h;
  }
  ModelConfig cfg_;
  std::vector<uint64_t> cache_;
  std::vector<uint64_t> step_h_;
  StepInput step_;
};

}  // namespace la::test
