// lookahead: command-line entry point.
//   lookahead generate --model DIR (--prompt TEXT | --input in.jsonl --output out.jsonl) [options]
//   lookahead bench-forward --model random:NAME --tokens 1,2,4 --context 256,1024   (forward cost vs step size)
//   lookahead save-model --model random:NAME --out DIR                              (dump weights as HF dir)
//   lookahead tokenize --model DIR (--text S | --input in.jsonl) [--decode]          (prompt ids as JSON lines)
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "lookahead/util/error.h"
#include "lookahead/dist/guard.h"

namespace po = boost::program_options;

namespace la::cli {

static void usage_main() {
  std::cout << "usage: lookahead <command> [options]\n\n"
               "commands:\n"
               "  generate       decode prompts (plain autoregressive or a lookahead strategy)\n"
               "  bench-forward  time one forward versus the number of step tokens\n"
               "  save-model     write a model (e.g. random:NAME) as a Hugging Face directory\n"
               "  score          print the logits of every position of a token sequence (JSON)\n"
               "  tokenize       print the prompt ids generate would use for texts (--decode: ids to text)\n\n"
               "`lookahead <command> --help` lists the command's options and defaults.\n";
}

}  // namespace la::cli

int main(int argc, char** argv) {
  using namespace la::cli;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage_main();
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  // generate may run as one rank of an MPI job: the guard names the rank in errors and aborts the whole job.
  // An interrupted run (SIGINT/SIGTERM: 130/143) ends the job cleanly, without MPI_Abort.
  if (cmd == "generate")
    return la::dist_main_guard([&] { return cmd_generate(argc - 1, argv + 1); }, "lookahead", {130, 143});
  try {
    if (cmd == "bench-forward") return cmd_bench_forward(argc - 1, argv + 1);
    if (cmd == "save-model") return cmd_save_model(argc - 1, argv + 1);
    if (cmd == "score") return cmd_score(argc - 1, argv + 1);
    if (cmd == "tokenize") return cmd_tokenize(argc - 1, argv + 1);
    std::cerr << "lookahead: error: unknown command '" << cmd << "' (try lookahead --help)\n";
    return 2;
  } catch (const po::error& e) {
    std::cerr << "lookahead: error: " << e.what() << " (see lookahead " << cmd << " --help)\n";
    return 2;
  } catch (const la::Error& e) {
    std::cerr << "lookahead: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "lookahead: error: " << e.what() << "\n";
    return 1;
  }
}
