// Golden test: greedy ids equal the original implementation's (llama2.c run.c, F32) for every reference record.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lookahead/decode/executor.h"
#include "lookahead/decode/generator.h"
#include "lookahead/decode/strategies.h"
#include "lookahead/engine/llama.h"
#include "lookahead/tokenizer/tokenizer.h"

using namespace la;

TEST(Golden, ReferenceJsonlBothModels) {
  const std::string shared = LA_SHARED_DIR;
  std::ifstream in(shared + "/models/REFERENCE.jsonl");
  ASSERT_TRUE(in.good()) << "missing " << shared << "/models/REFERENCE.jsonl";
  std::string line;
  int records = 0;
  std::map<std::string, std::unique_ptr<StepModel>> models;
  while (std::getline(in, line)) {
    auto r = nlohmann::json::parse(line);
    const std::string name = r["model"], dir = shared + "/models/" + name;
    if (!models.count(name)) models[name] = load_llama({dir, "fp32", "cpu", 0, 0});
    StepModel& m = *models[name];
    auto tok = Tokenizer::load(dir, m.config().bos_id);
    auto prompt = tok->encode(r["prompt"].get<std::string>());
    std::vector<int32_t> want = r["ids_after_bos"].get<std::vector<int32_t>>();
    const int steps = r["steps"];
    // run.c forwards positions 0..steps-1: after the prompt, steps - (prompt tokens - 1) tokens are produced.
    const int new_tokens = steps - (static_cast<int>(prompt.size()) - 1);
    ASSERT_EQ(prompt[0], m.config().bos_id);
    for (size_t i = 1; i < prompt.size(); ++i) ASSERT_EQ(prompt[i], want[i - 1]) << name << " prompt token " << i;
    auto ar = make_ar_strategy();
    LocalExecutor ex(m);
    Generator gen(ex, *ar, m.config());
    GenParams gp;
    gp.max_new_tokens = new_tokens;
    auto res = gen.generate(prompt, gp);
    std::vector<int32_t> got(prompt.begin() + 1, prompt.end());
    got.insert(got.end(), res.ids.begin(), res.ids.end());
    // run.c stops when it samples BOS (id 1) without printing it; we include the eos that ended generation.
    if (!got.empty() && got.back() == 1 && static_cast<int>(want.size()) < steps) got.pop_back();
    EXPECT_EQ(got, want) << name << " / " << r["id"];
    ++records;
  }
  EXPECT_EQ(records, 6);
}
