// bench-forward, score, save-model and tokenize.
#include <boost/program_options.hpp>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli.h"
#include "lookahead/engine/llama.h"
#include "lookahead/model/config.h"
#include "lookahead/model/model_path.h"
#include "lookahead/options/parse.h"
#include "lookahead/engine/selfcheck.h"
#include "lookahead/util/clock.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "lookahead/io/prompt_records.h"

namespace po = boost::program_options;
using json = nlohmann::json;

namespace la::cli {

// The load flags (--model, --dtype, --device, --threads and the device options): device_options.cpp, apart
// from the model code so that the --config fuzz target links them.

namespace {
// Parses the command line into vm (parse_checked); prints the help and returns true if --help was given.
bool parse_or_help(int argc, char** argv, const po::options_description& d, po::variables_map& vm) {
  if (parse_checked(argc, argv, d, vm)) return false;
  std::cout << d;
  return true;
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
  d.add_options()("help,h", "show this help")(
      "tokens", po::value(&tokens)->default_value(tokens), "comma list of step sizes T")(
      "context", po::value(&contexts)->default_value(contexts), "comma list of committed context lengths")(
      "repeat", po::value(&repeat)->default_value(5), "timed repetitions per point (after two warm-ups)");
  std::string graphs;
  add_load_options(d, lo, graphs);
  po::variables_map vm;
  if (parse_or_help(argc, argv, d, vm)) return 0;
  const bool both = lo.kernels == "both";  // time the kernel and the ATen forward on one set of weights
  if (both) lo.kernels = "on", lo.keep_float_weights = true;  // the ATen fork reads the float copies
  check_load_options(lo, graphs);
  LA_CHECK(repeat >= 1, "--repeat must be >= 1");
  auto Ts = int_list(tokens, "tokens");
  auto Cs = int_list(contexts, "context");
  auto m = load_llama(lo);
  std::unique_ptr<StepModel> aten;
  if (both) aten = fork_with_kernels(*m, false, false);
  const auto& c = m->config();
  std::cout << "model " << m->describe() << "\n";
  if (aten) std::cout << "reference " << aten->describe() << " (same weights)\n";
  std::cout << std::setw(8) << "context" << std::setw(8) << "T" << std::setw(14) << "forward_ms" << std::setw(12)
            << "vs_T1";
  if (aten) std::cout << std::setw(14) << "aten_ms" << std::setw(12) << "aten/kern";
  std::cout << "\n";
  SampleParams sp;
  for (int ctx : Cs) {
    double base = 0;
    for (int T : Ts) {
      if (ctx + T > c.max_positions) {
        std::cout << std::setw(8) << ctx << std::setw(8) << T << "   (past max positions)\n";
        continue;
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
      auto time_ms = [&](StepModel& mm) {
        mm.truncate(0);
        for (int done = 0; done < ctx;) {  // fill the cache with ctx tokens in chunks
          const int n = std::min(256, ctx - done);
          std::vector<int32_t> chunk(n);
          for (int i = 0; i < n; ++i) chunk[i] = (done + i) % c.vocab;
          append_chain(mm, chunk);
          done += n;
        }
        mm.forward(in, sp);  // warm-ups (with CUDA graphs: the eager run, then the capture)
        mm.forward(in, sp);
        const Stopwatch watch;
        for (int r = 0; r < repeat; ++r) mm.forward(in, sp);
        return watch.seconds() * 1e3 / repeat;
      };
      const double ms = time_ms(*m);
      if (T == Ts.front()) base = ms;
      std::cout << std::setw(8) << ctx << std::setw(8) << T << std::setw(14) << std::fixed << std::setprecision(3) << ms
                << std::setw(12) << std::setprecision(2) << (base > 0 ? ms / base : 0.0);
      if (aten) {
        const double ams = time_ms(*aten);
        std::cout << std::setw(14) << std::setprecision(3) << ams << std::setw(12) << std::setprecision(2) << ams / ms;
      }
      std::cout << std::endl;
    }
  }
  return 0;
}

int cmd_score(int argc, char** argv) {
  LoadOptions lo;
  std::string ids_s;
  int from = 0;
  po::options_description d("lookahead score: logits of every position of a token sequence, as JSON\n\nOptions");
  d.add_options()("help,h", "show this help")("ids", po::value(&ids_s)->required(), "comma list of token ids")(
      "from", po::value(&from)->default_value(0), "print logits from this position on (large vocabularies)");
  std::string graphs;
  add_load_options(d, lo, graphs);
  po::variables_map vm;
  if (parse_or_help(argc, argv, d, vm)) return 0;
  check_load_options(lo, graphs);
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
  d.add_options()("help,h", "show this help")("out", po::value(&out)->required(), "output directory (must exist)");
  add_model_option(d, lo.model);
  po::variables_map vm;
  if (parse_or_help(argc, argv, d, vm)) return 0;
  lo.model = check_model_option(lo.model);
  LA_CHECK(is_directory(out), "--out directory '", out, "' does not exist");
  auto m = load_llama(lo);
  save_hf_directory(*m, out);
  std::cout << "wrote " << out << "\n";
  return 0;
}

ModelDir tokenizer_files(const std::string& model, const std::string& tokenizer_dir) {
  return ModelDir(tokenizer_dir_of(model, tokenizer_dir));
}

std::unique_ptr<Tokenizer> open_tokenizer(const ModelDir& files, const std::string& model,
                                          const std::string& tokenizer_dir, const ModelConfig* cfg) {
  const int bos = cfg ? cfg->bos_id : -1;
  std::unique_ptr<Tokenizer> tok;
  if (tokenizer_dir == "bytes" || (tokenizer_dir.empty() && is_random_model(model)))
    tok = Tokenizer::bytes(bos);  // e.g. a saved random: model, ids in and out
  else
    tok = Tokenizer::load(files, bos);
  if (cfg)
    LA_CHECK(tok->vocab_size() <= cfg->vocab, "tokenizer has ", tok->vocab_size(),
             " pieces but the model's vocabulary is ", cfg->vocab);
  return tok;
}

namespace {
// Every record of a JSONL file (parse_tokenize_record: the checked JSON reader), validated before anything is
// printed.
std::vector<TokenizeRecord> read_records(const std::string& path, bool decode) {
  LA_CHECK(file_exists(path), "--input file '", path, "' does not exist");
  std::ifstream in(path, std::ios::binary);
  std::vector<TokenizeRecord> recs;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    TokenizeRecord r;
    if (parse_tokenize_record(line, recs.size(), path + ":" + std::to_string(lineno), decode, r))
      recs.push_back(std::move(r));
  }
  LA_CHECK(!recs.empty(), "--input file '", path, "' holds no records");
  return recs;
}
}  // namespace

int cmd_tokenize(int argc, char** argv) {
  std::string model, tokenizer_dir, text, input, ids_s;
  bool decode = false;
  po::options_description d(
      "lookahead tokenize: the prompt ids generate would use for a text (BOS as the model's tokenizer config says),\n"
      "one JSON line {\"id\", \"ids\"} per input; --decode turns ids back into {\"id\", \"text\"}\n\nOptions");
  add_model_option(d, model);  // its tokenizer and BOS
  d.add_options()("help,h", "show this help")(
      "tokenizer", po::value(&tokenizer_dir), "directory with tokenizer.model or tokenizer.json, or a GGUF file (its "
                                              "tokenizer.ggml.* metadata only; default: the model's)")(
      "text", po::value(&text), "one text to encode")(
      "input", po::value(&input), "JSONL file of {\"id\", \"text\"} (or \"prompt\") records; with --decode {\"id\", \"ids\": [...]}")(
      "ids", po::value(&ids_s), "with --decode: a comma list of token ids")(
      "decode", po::bool_switch(&decode), "decode ids to text (special tokens as their text)");
  po::variables_map vm;
  if (parse_or_help(argc, argv, d, vm)) return 0;
  LA_CHECK(!model.empty() || !tokenizer_dir.empty(), "give --model DIR or --tokenizer DIR");
  if (!model.empty()) model = resolve_model_path(model, "--model");
  if (!tokenizer_dir.empty() && tokenizer_dir != "bytes") tokenizer_dir = resolve_model_path(tokenizer_dir, "--tokenizer");
  const int sources = int(vm.count("text")) + int(vm.count("input")) + int(vm.count("ids"));
  LA_CHECK(sources == 1, decode ? "give one of --ids LIST and --input FILE" : "give one of --text TEXT and --input FILE");
  LA_CHECK(!(decode && vm.count("text")), "--decode takes --ids or --input, not --text");
  LA_CHECK(decode || !vm.count("ids"), "--ids needs --decode (to encode, give --text)");

  std::vector<TokenizeRecord> recs;
  if (!input.empty()) {
    recs = read_records(input, decode);
  } else if (decode) {
    const auto v = int_list(ids_s, "ids", 0);
    recs.push_back({json(0), {}, std::vector<int32_t>(v.begin(), v.end())});
  } else {
    recs.push_back({json(0), text, {}});
  }
  // --model of a vocabulary-only GGUF (no tensors): its tokenizer.ggml.* only, no model config (no architecture).
  std::unique_ptr<ModelConfig> cfg;
  if (!model.empty() && !is_vocab_only_gguf(model)) cfg = std::make_unique<ModelConfig>(model_config_of(model));
  const auto tok = open_tokenizer(tokenizer_files(model, tokenizer_dir), model, tokenizer_dir, cfg.get());
  std::string out;
  for (const auto& r : recs) {
    json rec = {{"id", r.id}};
    if (decode) {
      for (auto id : r.ids)
        LA_CHECK(id < tok->vocab_size(), "record ", r.id.dump(), ": token id ", id, " is outside the tokenizer's ",
                 tok->vocab_size(), " ids");
      rec["text"] = tok->decode(r.ids);
    } else {
      rec["ids"] = tok->encode(r.text);  // the same call generate makes for a prompt
    }
    out += rec.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  }
  std::cout << out << std::flush;
  LA_CHECK(std::cout.good(), "writing to stdout failed");
  return 0;
}

}  // namespace la::cli
