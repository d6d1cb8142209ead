#include "lookahead/options/parse.h"

#include <cctype>
#include <fstream>
#include <string>

#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace po = boost::program_options;

namespace la {
namespace {

void check_no_placeholders(const std::string& text, const std::string& where) {
  for (size_t i = text.find('%'); i != std::string::npos; i = text.find('%', i + 1)) {
    size_t j = i + 1;
    while (j < text.size() && (std::islower(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
    if (j > i + 1 && j < text.size() && text[j] == '%')
      fail(where, " holds '", text.substr(i, j - i + 1), "': a %name% sequence is not accepted in options");
  }
}

void check_args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) check_no_placeholders(argv[i], "argument " + std::to_string(i));
}

void check_file(const std::string& path, const std::string& where) {
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) check_no_placeholders(line, where + " line " + std::to_string(n));
}

}  // namespace

bool parse_checked(int argc, char** argv, const po::options_description& desc, po::variables_map& vm,
                   const char* config_option) {
  po::parsed_options parsed(&desc);
  try {
    parsed = po::parse_command_line(argc, argv, desc);
    // No command takes a bare word: Boost keeps one as a positional token and store() drops it, so `generate
    // ... ar` (meant as --strategy ar) would run the default strategy without a word.
    for (const po::option& o : parsed.options)
      LA_CHECK(o.position_key < 0, "unexpected argument '", o.value.empty() ? std::string() : o.value.front(),
               "': every option is --name [value] (see --help)");
    po::store(parsed, vm);
  } catch (const po::error&) {
    check_args(argc, argv);  // before the error's what()
    throw;
  }
  if (vm.count("help")) return false;
  std::string config;
  if (config_option && vm.count(config_option)) {
    config = vm[config_option].as<std::string>();
    LA_CHECK(file_exists(config), "--", config_option, " file '", config, "' does not exist");
    try {
      po::store(po::parse_config_file<char>(config.c_str(), desc), vm);
    } catch (const po::error&) {
      check_file(config, "--" + std::string(config_option) + " file '" + config + "'");
      throw;
    }
  }
  try {
    po::notify(vm);
  } catch (const po::error&) {
    check_args(argc, argv);
    if (!config.empty()) check_file(config, "--" + std::string(config_option) + " file");
    throw;
  }
  return true;
}

}  // namespace la
