// Fuzzes `lookahead generate --config FILE`: the fuzzed bytes are the options file, parsed by the CLI's own
// parse_generate_options (Boost.Program_options' INI reader over every generate flag) and then checked by
// check_generate_options, as `generate` does before loading anything. A program_options error is the CLI's clean
// rejection (main.cpp: one line, exit 2), as is la::Error; anything else fails the run. The sources of the option
// handling are compiled into this target (tests/fuzz/CMakeLists.txt); nothing is loaded or run.
#include "../../src/cli/generate_options.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = la::fuzz::write_scratch("generate.conf", data, size);
  la::fuzz::rejecting([&] {
    try {
      la::cli::GenerateOptions o;
      std::string a0 = "generate", a1 = "--config", a2 = path;
      char* argv[] = {a0.data(), a1.data(), a2.data(), nullptr};
      if (!la::cli::parse_generate_options(3, argv, o)) return;
      la::cli::check_generate_options(o);
      if (o.batch_size < 0 || o.lp_k < 0) la::fuzz::broken("accepted options with a negative batch or group size");
    } catch (const boost::program_options::error& e) {
      throw la::Error(e.what());
    }
  });
  return 0;
}
