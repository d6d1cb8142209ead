// The load flags, declared and checked once for every command (cli.h): --model, --dtype, --device, --threads,
// --kernels, --cuda-graphs, --cuda-gemm, --selfcheck and --max-context. Apart from tools.cpp so that the option
// parsing of `generate` links without the model code (tests/fuzz/fuzz_generate_config.cpp; LoadOptions::validate
// is src/engine/load_options.cpp, libtorch-free).
#include <boost/program_options.hpp>
#include <string>

#include "cli.h"
#include "lookahead/model/model_path.h"
#include "lookahead/util/error.h"

namespace po = boost::program_options;

namespace la::cli {

void add_model_option(po::options_description& d, std::string& model) {
  d.add_options()("model", po::value(&model),
                  "Hugging Face model directory, a GGUF file, a NAME under $LOOKAHEAD_DEPS/models (default "
                  "~/.cache/lookahead/models; e.g. SmolLM2-135M-Instruct), or random:NAME[:SEED] (dummy weights)");
}

void add_dtype_device_options(po::options_description& d, LoadOptions& lo) {
  d.add_options()("dtype", po::value(&lo.dtype)->default_value("fp32"), "fp32 | fp16 | bf16")(
      "device", po::value(&lo.device)->default_value("cpu"), "cpu | cuda")(
      "threads", po::value(&lo.threads)->default_value(0),
      "CPU threads of the kernel forward's pool (0: every core, or OMP_NUM_THREADS when set)");
}

void add_load_options(po::options_description& d, LoadOptions& lo, std::string& graphs) {
  add_model_option(d, lo.model);
  add_dtype_device_options(d, lo);
  add_device_options(d, lo, graphs);
}

std::string check_model_option(const std::string& model) {
  LA_CHECK(!model.empty(), "--model is required");
  return resolve_model_path(model, "--model");
}

void check_load_options(LoadOptions& lo, const std::string& graphs) {
  lo.model = check_model_option(lo.model);
  lo.validate();  // --dtype, --device, --threads, --kernels, --cuda-gemm, --selfcheck: before anything is loaded
  LA_CHECK(graphs == "on" || graphs == "off", "invalid --cuda-graphs '", graphs, "' (expected on or off)");
  lo.cuda_graphs = graphs == "on";
}

void add_device_options(po::options_description& d, LoadOptions& lo, std::string& graphs) {
  d.add_options()("kernels", po::value(&lo.kernels)->default_value("on"),
                  "on = the lookahead kernels: with --device cuda the CUDA kernels (fused ops, step attention, device "
                  "argmax) for steps of up to 256 tokens; on CPU the batch-invariant CPU kernels (fp32/bf16/fp16 weights, "
                  "AVX2+FMA+F16C or portable, one thread pool of --threads); off = the ATen forward only (reference); "
                  "bench-forward also takes both (the ATen forward timed beside, on the same weights)")(
      "cuda-graphs", po::value(&graphs)->default_value("on"),
      "--device cuda with --kernels on: replay one CUDA graph per step bucket (1, 8, 16, ..., 256 tokens): on | off")(
      "cuda-gemm", po::value(&lo.cuda_gemm)->default_value("fixed"),
      "--device cuda with --kernels on: the projections' GEMM: fixed = the lookahead fixed-configuration GEMM (a "
      "token's logits the same bits in every step size; speed against cuBLAS not measured: no GPU here) | cublas")(
      "selfcheck", po::value(&lo.selfcheck),
      "at load, run random tree steps on the kernel path (and its CUDA graphs) next to the ATen forward on the same "
      "weights; on = serve the first path that agrees (kernels+graphs, kernels, ATen), strict = exit naming a "
      "mismatch, off = no check (default: on with --device cuda, off on CPU)")(
      "max-context", po::value(&lo.max_context)->default_value(0),
      "at most this many positions per request (prompt + new tokens): caps the KV cache, which grows on demand up "
      "to it (0: the model's max_position_embeddings)");
}

}  // namespace la::cli
