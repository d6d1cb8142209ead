// The CUDA forward with the lookahead kernels (and CUDA graphs) against the ATen forward: tree-step logits and
// greedy ids on random trees over a growing cache, commits of non-prefix paths, steps in every graph bucket and
// larger than the last (ATen fallback on the same cache), sampling, forks. Skips without a CUDA device (CI); the
// GPU session runs it: test_model --gtest_filter='CudaForward*'.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common.h"
#include "lookahead/backend/cuda/step_layout.h"
#include "lookahead/util/files.h"

namespace la::test {
namespace {

bool have_cuda() { return cuda_device_count() > 0; }

bool present(const std::string& model) { return is_random_model(model) || file_exists(model + "/config.json"); }

// Story prompts where the shared folder is there, else fixed pseudo-random ids (a bundled binary elsewhere).
std::vector<std::vector<int32_t>> prompts_for(int n, int vocab) {
  if (file_exists(stories() + "/tokenizer.model")) return prompt_ids(n, vocab);
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> out(n);
  for (auto& p : out) {
    p.push_back(1);
    for (int i = 0; i < 20; ++i) p.push_back(std::uniform_int_distribution<int>(3, vocab - 1)(rng));
  }
  return out;
}

#define SKIP_UNLESS_READY(c)                                                           \
  do {                                                                                 \
    if (!have_cuda()) GTEST_SKIP() << "no CUDA device";                                \
    if (!present((c).model)) GTEST_SKIP() << (c).model << " missing (set LA_SHARED)"; \
  } while (0)

std::unique_ptr<StepModel> load(const std::string& model, const std::string& dtype, const std::string& device,
                                const std::string& kernels, bool graphs) {
  LoadOptions o;
  o.model = model;
  o.dtype = dtype;
  o.device = device;
  o.kernels = kernels;
  o.cuda_graphs = graphs;
  return load_llama(o);
}

StepInput random_tree(int T, int L, int vocab, std::mt19937& rng) {
  StepInput in;
  for (int i = 0; i < T; ++i) {
    const int p = i == 0 ? -1 : std::uniform_int_distribution<int>(std::max(0, i - 6), i - 1)(rng);
    in.tokens.push_back(std::uniform_int_distribution<int>(0, vocab - 1)(rng));
    in.parents.push_back(p);
    in.positions.push_back(p < 0 ? L : in.positions[p] + 1);
  }
  return in;
}

// A root-to-node path of the step (node 0 first), as commit() takes it.
std::vector<int32_t> path_to(const StepInput& in, int node) {
  std::vector<int32_t> p;
  for (int a = node; a >= 0; a = in.parents[a]) p.insert(p.begin(), a);
  return p;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 1e-3;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, double(std::fabs(a[i] - b[i])));
    den = std::max(den, double(std::fabs(b[i])));
  }
  return num / den;
}

struct Case {
  std::string model, dtype;
  bool graphs;
  double tol;
};

// gtest prints a failing case's parameter with this (otherwise as "80-byte object <...>").
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << " " << c.dtype << (c.graphs ? " graphs" : " eager") << " tol " << c.tol;
}

class CudaForward : public ::testing::TestWithParam<Case> {};

TEST_P(CudaForward, TreeStepsAndCommitsMatchAtenForward) {
  const Case c = GetParam();
  SKIP_UNLESS_READY(c);
  auto ref = load(c.model, c.dtype, "cuda", "off", false);
  auto ker = load(c.model, c.dtype, "cuda", "on", c.graphs);
  ASSERT_NE(ker->describe().find("kernels"), std::string::npos) << ker->describe();
  const int V = ref->config().vocab;
  std::mt19937 rng(7);
  // Prefill longer than the largest bucket: both take the ATen path for it, on the same cache layout.
  std::vector<int32_t> prompt(ref->config().max_positions >= 2048 ? 300 : 24);
  for (auto& t : prompt) t = std::uniform_int_distribution<int>(0, V - 1)(rng);
  append_chain(*ref, prompt);
  append_chain(*ker, prompt);
  // Steps of every bucket, repeated so graphs are warmed, captured and replayed at growing cache lengths.
  const std::vector<int> sizes{1, 1, 1, 5, 5, 5, 8, 13, 13, 16, 31, 31, 60, 60, 64, 100, 100, 200, 200, 256, 1, 3};
  for (size_t k = 0; k < sizes.size(); ++k) {
    const int T = sizes[k], L = ref->cache_len();
    ASSERT_EQ(ker->cache_len(), L);
    if (L + T >= ref->config().max_positions - 8) break;  // positions must stay inside the context
    SCOPED_TRACE("step " + std::to_string(k) + " T=" + std::to_string(T) + " L=" + std::to_string(L));
    const StepInput in = random_tree(T, L, V, rng);
    std::vector<float> lr, lk;
    const auto ir = ref->forward(in, SampleParams{}, &lr);
    const auto ik = ker->forward(in, SampleParams{}, &lk);
    // The hot path (device argmax only, no logits copied) gives the same ids: run the step again on a copy.
    ker->truncate(L);
    EXPECT_EQ(ker->forward(in, SampleParams{}), ik);
    EXPECT_LT(max_rel(lk, lr), c.tol);
    if (c.dtype == "fp32") { EXPECT_EQ(ik, ir); }
    const auto path = path_to(in, std::uniform_int_distribution<int>(0, T - 1)(rng));
    ref->commit(path);
    ker->commit(path);
  }
  // After all commits, plain decoding continues identically (the caches hold the same rows).
  for (int i = 0; i < 6; ++i) {
    const StepInput in = StepInput::chain({int32_t(i * 37 % V)}, ref->cache_len());
    std::vector<float> lr, lk;
    ref->forward(in, SampleParams{}, &lr);
    ker->forward(in, SampleParams{}, &lk);
    EXPECT_LT(max_rel(lk, lr), c.tol) << "continuation " << i;
    ref->commit({0});
    ker->commit({0});
  }
}

TEST_P(CudaForward, GreedyDecodingOfEveryStrategyEqualsPlain) {
  const Case c = GetParam();
  SKIP_UNLESS_READY(c);
  if (c.dtype != "fp32") GTEST_SKIP() << "token identity is promised in fp32 only";
  auto m = load(c.model, c.dtype, "cuda", "on", c.graphs);
  auto cpu = load(c.model, c.dtype, "cpu", "off", false);
  const auto prompts = prompts_for(4, m->config().vocab);
  GenParams gp;
  gp.max_new_tokens = 40;
  StrategyOptions ar;
  auto s0 = make_strategy(ar);
  const auto plain = run_all(*m, *s0, prompts, gp);
  auto sc = make_strategy(ar);
  EXPECT_EQ(run_all(*cpu, *sc, prompts, gp), plain) << "CUDA plain decoding differs from the CPU run";
  for (const std::string name : {"jacobi", "lade", "trie", "prompt-lookup"}) {
    StrategyOptions o;
    o.name = name;
    auto s = make_strategy(o);
    EXPECT_EQ(run_all(*m, *s, prompts, gp), plain) << name;
  }
}

TEST_P(CudaForward, SamplingAndForkUseTheKernels) {
  const Case c = GetParam();
  SKIP_UNLESS_READY(c);
  auto ref = load(c.model, c.dtype, "cuda", "off", false);
  auto ker = load(c.model, c.dtype, "cuda", "on", c.graphs);
  auto fk = ker->fork();
  ASSERT_TRUE(fk);
  const auto prompts = prompts_for(2, ref->config().vocab);
  GenParams gp;
  gp.max_new_tokens = 24;
  gp.sample.temperature = 0.8f;
  gp.sample.seed = 3;
  StrategyOptions o;
  o.name = "lade";
  auto s1 = make_strategy(o), s2 = make_strategy(o), s3 = make_strategy(o);
  const auto a = run_all(*ker, *s1, prompts, gp);
  const auto b = run_all(*fk, *s2, prompts, gp);
  EXPECT_EQ(a, b) << "a fork decodes like its parent";
  if (c.dtype == "fp32") { EXPECT_EQ(run_all(*ref, *s3, prompts, gp), a) << "kernels vs ATen, sampled"; }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaForward,
                         ::testing::Values(Case{stories(), "fp32", true, 1e-4}, Case{stories(), "fp32", false, 1e-4},
                                           Case{"random:tiny-gqa-bias:3", "fp32", true, 1e-4},
                                           Case{"random:tiny-mha:2", "bf16", true, 5e-2},
                                           Case{"random:tinyllama-1.1b", "bf16", true, 5e-2}),
                         [](const auto& info) {
                           std::string n = std::to_string(info.index) + "_" + info.param.dtype +
                                           (info.param.graphs ? "_graphs" : "_eager");
                           return n;
                         });

}  // namespace
}  // namespace la::test
