// Tree steps against Hugging Face transformers: tests/scripts/hf_arch_compare.py writes a model made by
// transformers and, for random trees on top of a prefix (nodes around the sliding-window edge), transformers'
// logits of each node's root-to-node path; this test (run by that script with LA_HF_TREES=spec.json) puts each
// tree in one step and compares every node's logits, on the ATen reference (--kernels off) and on the CPU kernels
// (the default), which must serve these architectures. Skipped when LA_HF_TREES is unset.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "lookahead/engine/llama.h"
#include "lookahead/util/files.h"

using namespace la;

TEST(HfTree, NodeLogitsEqualTransformers) {
  const char* spec = std::getenv("LA_HF_TREES");
  if (!spec || !*spec) GTEST_SKIP() << "LA_HF_TREES not set (tests/scripts/hf_arch_compare.py sets it)";
  const auto j = nlohmann::json::parse(read_file(spec));
  for (const char* kernels : {"off", "on"}) {
  LoadOptions o;
  o.model = j["model"].get<std::string>();
  o.kernels = kernels;
  o.threads = 1;
  auto m = load_llama(o);
  if (std::string(kernels) == "on") {
    ASSERT_NE(m->describe().find("cpu kernels"), std::string::npos) << m->describe();
  }
  const int V = m->config().vocab;
  for (const auto& t : j["trees"]) {
    const auto ctx = t["ctx"].get<std::vector<int32_t>>();
    m->truncate(0);
    append_chain(*m, ctx);
    StepInput in;
    in.tokens = t["tokens"].get<std::vector<int32_t>>();
    in.parents = t["parents"].get<std::vector<int32_t>>();
    in.positions = t["positions"].get<std::vector<int32_t>>();
    std::vector<float> lg;
    m->forward(in, SampleParams{}, &lg);
    const auto want = t["logits"].get<std::vector<std::vector<float>>>();
    ASSERT_EQ(lg.size(), want.size() * V);
    for (size_t i = 0; i < want.size(); ++i) {
      float diff = 0, scale = 0;
      for (int v = 0; v < V; ++v) {
        diff = std::max(diff, std::abs(lg[i * V + v] - want[i][v]));
        scale = std::max(scale, std::abs(want[i][v]));
      }
      EXPECT_LE(diff, 1e-4f * std::max(1.f, scale)) << "kernels " << kernels << ", prefix " << ctx.size() << ", node "
                                                    << i << " at position " << in.positions[i];
    }
  }
  }
}
