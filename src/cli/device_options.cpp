// --kernels, --cuda-graphs, --cuda-gemm, --selfcheck and --max-context (cli.h): apart from tools.cpp so that the
// option parsing of `generate` links without the model code (tests/fuzz/fuzz_generate_config.cpp).
#include <boost/program_options.hpp>
#include <string>

#include "cli.h"
#include "lookahead/model/selfcheck.h"
#include "lookahead/util/error.h"

namespace po = boost::program_options;

namespace la::cli {

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

void apply_device_options(LoadOptions& lo, const std::string& graphs) {  // bench-forward maps "both" to "on" first
  LA_CHECK(lo.kernels == "on" || lo.kernels == "off", "invalid --kernels '", lo.kernels, "' (expected on or off)");
  LA_CHECK(graphs == "on" || graphs == "off", "invalid --cuda-graphs '", graphs, "' (expected on or off)");
  lo.cuda_graphs = graphs == "on";
  LA_CHECK(lo.cuda_gemm == "fixed" || lo.cuda_gemm == "cublas", "invalid --cuda-gemm '", lo.cuda_gemm,
           "' (expected fixed or cublas)");
  if (!lo.selfcheck.empty()) parse_selfcheck_mode(lo.selfcheck);  // a bad value fails before loading
}

}  // namespace la::cli
