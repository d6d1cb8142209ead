// The one parse of a command's options (Boost.Program_options), for every command and the C++ benchmarks.
#pragma once
#include <boost/program_options.hpp>

namespace la {

// Parses argv into vm and, when `config_option` names a flag that was given, the INI-style file it names (flags
// win; the file must exist), then notifies vm. Returns false, before the config file and before notify, when
// --help was given: the caller prints its help.
//
// Boost.Program_options fills its error messages by replacing %value%, %option%, %original_token%, ... in a loop
// that never ends when the text it puts in holds the same sequence: `--max-new-tokens %value%` hung in what()
// (found by fuzz_generate_config; SIGTERM does not stop it). So when Boost refuses the options, and only then (a
// prompt may hold "%path%"), the arguments (and the config file's lines, when it was read) with such a sequence are
// one la::Error naming the argument or line, thrown before anything calls the Boost error's what().
bool parse_checked(int argc, char** argv, const boost::program_options::options_description& desc,
                   boost::program_options::variables_map& vm, const char* config_option = nullptr);

}  // namespace la
