#pragma once
#include <boost/program_options.hpp>
#include <memory>
#include <string>

#include "lookahead/model/config.h"
#include "lookahead/engine/llama.h"
#include "lookahead/tokenizer/tokenizer.h"

namespace la::cli {
int cmd_tokenize(int argc, char** argv);
// The tokenizer generate and tokenize use: --tokenizer DIR if given (`bytes`: the byte tokenizer, for any model),
// else the model directory's (a byte tokenizer for random: models). With a model config, its BOS is the default
// and its vocabulary must hold the tokenizer's.
std::unique_ptr<Tokenizer> open_tokenizer(const std::string& model, const std::string& tokenizer_dir,
                                          const ModelConfig* cfg);
// --kernels and --cuda-graphs (CUDA forward options) into `d`; apply_device_options validates them into `lo`.
void add_device_options(boost::program_options::options_description& d, LoadOptions& lo, std::string& graphs);
void apply_device_options(LoadOptions& lo, const std::string& graphs);
int cmd_generate(int argc, char** argv);
int cmd_bench_forward(int argc, char** argv);
int cmd_save_model(int argc, char** argv);
int cmd_score(int argc, char** argv);
}  // namespace la::cli
