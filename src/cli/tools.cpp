// bench-forward and save-model.
#include <boost/program_options.hpp>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "lookahead/model/llama.h"
#include "lookahead/model/model_path.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace po = boost::program_options;

namespace la::cli {
namespace {
// Parses the command line into vm; prints the help and returns true if --help was given.
bool parse_or_help(int argc, char** argv, const po::options_description& d, po::variables_map& vm) {
  po::store(po::parse_command_line(argc, argv, d), vm);
  if (vm.count("help")) {
    std::cout << d;
    return true;
  }
  po::notify(vm);
  return false;
}

std::vector<int> int_list(const std::string& s, const char* flag, int min_value = 1) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) {
    try {
      v.push_back(std::stoi(x));
    } catch (const std::exception&) {
      fail("--", flag, ": '", x, "' is not an integer");
    }
    LA_CHECK(v.back() >= min_value, "--", flag, " values must be >= ", min_value);
  }
  LA_CHECK(!v.empty(), "--", flag, " is empty");
  return v;
}
}  // namespace

int cmd_bench_forward(int argc, char** argv) {
  LoadOptions lo;
  std::string tokens = "1,2,4,8,16,32,64,128,256", contexts = "256,1024";
  int repeat = 5;
  po::options_description d("lookahead bench-forward: forward time versus step tokens (tree of T tokens)\n\nOptions");
  d.add_options()("help,h", "show this help")("model", po::value(&lo.model)->required(), "model dir, cached NAME or random:NAME")(
      "dtype", po::value(&lo.dtype)->default_value("fp32"), "fp32 | fp16 | bf16")(
      "device", po::value(&lo.device)->default_value("cpu"), "cpu | cuda")(
      "threads", po::value(&lo.threads)->default_value(0), "CPU threads")(
      "tokens", po::value(&tokens)->default_value(tokens), "comma list of step sizes T")(
      "context", po::value(&contexts)->default_value(contexts), "comma list of committed context lengths")(
      "repeat", po::value(&repeat)->default_value(5), "timed repetitions per point (after one warm-up)");
  po::variables_map vm;
  if (parse_or_help(argc, argv, d, vm)) return 0;
  lo.model = resolve_model_path(lo.model);
  LA_CHECK(repeat >= 1, "--repeat must be >= 1");
  auto Ts = int_list(tokens, "tokens");
  auto Cs = int_list(contexts, "context");
  auto m = load_llama(lo);
  const auto& c = m->config();
  std::cout << "model " << m->describe() << "\n";
  std::cout << std::setw(8) << "context" << std::setw(8) << "T" << std::setw(14) << "forward_ms" << std::setw(12)
            << "vs_T1" << "\n";
  SampleParams sp;
  for (int ctx : Cs) {
    double base = 0;
    for (int T : Ts) {
      if (ctx + T > c.max_positions) {
        std::cout << std::setw(8) << ctx << std::setw(8) << T << "   (past max positions)\n";
        continue;
      }
      m->truncate(0);
      // fill the cache with ctx tokens in chunks
      for (int done = 0; done < ctx;) {
        const int n = std::min(256, ctx - done);
        std::vector<int32_t> chunk(n);
        for (int i = 0; i < n; ++i) chunk[i] = (done + i) % c.vocab;
        append_chain(*m, chunk);
        done += n;
      }
      StepInput in;  // a tree: two-way branching chain mix
      for (int i = 0; i < T; ++i) {
        const int p = i == 0 ? -1 : (i - 1) / 2;
        in.tokens.push_back((7 * i + 3) % c.vocab);
        in.parents.push_back(p);
      }
      for (int i = 0; i < T; ++i) {
        int depth = 0;
        for (int a = in.parents[i]; a >= 0; a = in.parents[a]) ++depth;
        in.positions.push_back(ctx + depth);
      }
      m->forward(in, sp);
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < repeat; ++r) m->forward(in, sp);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / repeat;
      if (T == Ts.front()) base = ms;
      std::cout << std::setw(8) << ctx << std::setw(8) << T << std::setw(14) << std::fixed << std::setprecision(3) << ms
                << std::setw(12) << std::setprecision(2) << (base > 0 ? ms / base : 0.0) << "\n";
    }
  }
  return 0;
}

int cmd_score(int argc, char** argv) {
  LoadOptions lo;
  std::string ids_s;
  int from = 0;
  po::options_description d("lookahead score: logits of every position of a token sequence, as JSON\n\nOptions");
  d.add_options()("help,h", "show this help")("model", po::value(&lo.model)->required(), "model dir, cached NAME or random:NAME")(
      "ids", po::value(&ids_s)->required(), "comma list of token ids")(
      "dtype", po::value(&lo.dtype)->default_value("fp32"), "fp32 | fp16 | bf16")(
      "device", po::value(&lo.device)->default_value("cpu"), "cpu | cuda")(
      "from", po::value(&from)->default_value(0), "print logits from this position on (large vocabularies)");
  po::variables_map vm;
  if (parse_or_help(argc, argv, d, vm)) return 0;
  lo.model = resolve_model_path(lo.model);
  const auto parsed = int_list(ids_s, "ids", 0);
  LA_CHECK(from >= 0 && from < static_cast<int>(parsed.size()), "--from must be in [0, ", parsed.size(), ")");
  const std::vector<int32_t> ids(parsed.begin(), parsed.end());
  LA_CHECK(!ids.empty(), "--ids is empty");
  auto m = load_llama(lo);
  LA_CHECK(static_cast<int>(ids.size()) <= m->config().max_positions, "--ids longer than the model's context");
  const StepInput in = StepInput::chain(ids, 0);
  std::vector<float> lg;
  auto next = m->forward(in, SampleParams{}, &lg);
  const int V = m->config().vocab;
  std::cout << "{\"vocab\": " << V << ", \"argmax\": [";
  for (size_t i = 0; i < next.size(); ++i) std::cout << (i ? ", " : "") << next[i];
  std::cout << "], \"logits\": [";
  std::cout << std::setprecision(9);
  for (size_t i = static_cast<size_t>(from) * V; i < lg.size(); ++i)
    std::cout << (i > static_cast<size_t>(from) * V ? ", " : "") << lg[i];
  std::cout << "]}\n";
  return 0;
}

int cmd_save_model(int argc, char** argv) {
  LoadOptions lo;
  std::string out;
  po::options_description d("lookahead save-model: write a model as a Hugging Face directory (F32 safetensors)\n\nOptions");
  d.add_options()("help,h", "show this help")("model", po::value(&lo.model)->required(), "model dir or random:NAME[:SEED]")(
      "out", po::value(&out)->required(), "output directory (must exist)");
  po::variables_map vm;
  if (parse_or_help(argc, argv, d, vm)) return 0;
  lo.model = resolve_model_path(lo.model);
  LA_CHECK(is_directory(out), "--out directory '", out, "' does not exist");
  auto m = load_llama(lo);
  save_hf_directory(*m, out);
  std::cout << "wrote " << out << "\n";
  return 0;
}

}  // namespace la::cli
