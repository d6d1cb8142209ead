#pragma once
#include <boost/program_options.hpp>
#include <string>

#include "lookahead/model/llama.h"

namespace la::cli {
// --kernels and --cuda-graphs (CUDA forward options) into `d`; apply_device_options validates them into `lo`.
void add_device_options(boost::program_options::options_description& d, LoadOptions& lo, std::string& graphs);
void apply_device_options(LoadOptions& lo, const std::string& graphs);
int cmd_generate(int argc, char** argv);
int cmd_bench_forward(int argc, char** argv);
int cmd_save_model(int argc, char** argv);
int cmd_score(int argc, char** argv);
}  // namespace la::cli
