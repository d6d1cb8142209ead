#pragma once
#include <boost/program_options.hpp>
#include <memory>
#include <string>

#include "lookahead/model/config.h"
#include "lookahead/model/model_dir.h"
#include "lookahead/engine/llama.h"
#include "lookahead/tokenizer/tokenizer.h"

namespace la::cli {
int cmd_tokenize(int argc, char** argv);
// The files generate and tokenize take the tokenizer (and generate the chat template) from: --tokenizer DIR if
// given, else the model's (tokenizer_dir_of), one ModelDir so that its tokenizer_config.json is read once.
ModelDir tokenizer_files(const std::string& model, const std::string& tokenizer_dir);
// The tokenizer of those files, or the byte tokenizer for --tokenizer bytes (any model) and for a random: model
// without --tokenizer. With a model config, its BOS is the default and its vocabulary must hold the tokenizer's.
std::unique_ptr<Tokenizer> open_tokenizer(const ModelDir& files, const std::string& model,
                                          const std::string& tokenizer_dir, const ModelConfig* cfg);
// The model-loading flags, declared here once for every command (one help text each): --model; --dtype, --device,
// --threads; --kernels, --cuda-graphs, --cuda-gemm, --selfcheck, --max-context (add_device_options).
// add_load_options adds all of them; check_load_options validates them once, before anything is loaded: --model
// given and resolved (model_path.h), LoadOptions::validate (llama.h: dtype through parse_dtype_name, the one
// parser; device, threads, kernels, cuda-gemm, selfcheck), --cuda-graphs into lo.cuda_graphs. bench-forward maps
// its --kernels both to on first.
void add_model_option(boost::program_options::options_description& d, std::string& model);
void add_dtype_device_options(boost::program_options::options_description& d, LoadOptions& lo);
void add_device_options(boost::program_options::options_description& d, LoadOptions& lo, std::string& graphs);
void add_load_options(boost::program_options::options_description& d, LoadOptions& lo, std::string& graphs);
std::string check_model_option(const std::string& model);  // "--model is required", else the resolved path
void check_load_options(LoadOptions& lo, const std::string& graphs);
int cmd_generate(int argc, char** argv);
int cmd_bench_forward(int argc, char** argv);
int cmd_save_model(int argc, char** argv);
int cmd_score(int argc, char** argv);
}  // namespace la::cli
