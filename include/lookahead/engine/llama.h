// Loading a Llama-family model as a StepModel (the libtorch forward lives in src/engine/torch_llama.cpp).
#pragma once
#include <memory>
#include <string>

#include "lookahead/model/step_model.h"

namespace la {

struct LoadOptions {
  std::string model;           // a Hugging Face directory, or random:NAME[:SEED]
  std::string dtype = "fp32";  // fp32 | fp16 | bf16
  std::string device = "cpu";  // cpu | cuda
  int device_index = 0;
  int threads = 0;             // CPU threads (0: every core, or OMP_NUM_THREADS when set)
  // The kernel forward ("on"): on CUDA the lookahead kernels (fused ops, step attention, device argmax) for steps
  // of up to 256 tokens; on the CPU the batch-invariant kernels of src/backend/cpu. "off": the ATen reference forward.
  std::string kernels = "on";
  bool cuda_graphs = true;     // with kernels: one CUDA graph per step bucket
  // --cuda-gemm: the CUDA kernel forward's projections. "fixed": kernels/gemm_rows (every output reduced over k in
  // one order whatever the step size: batch-invariant); "cublas": cuBLAS (its algorithm depends on M).
  std::string cuda_gemm = "fixed";
  // --selfcheck on|off|strict (lookahead/engine/selfcheck.h); "": on with --device cuda, off on CPU.
  std::string selfcheck = "";
  // --max-context: at most this many positions (prompt + new tokens; 0: the model's max_position_embeddings). The
  // KV cache grows on demand up to it; a request needing more is refused naming the limit.
  int max_context = 0;

  // Every value above checked in one place (one la::Error naming the flag): the CLI calls it before anything is
  // loaded (cli.h: check_load_options), load_llama again for callers that skip the CLI.
  void validate() const;

  // Keep the float copies of a GGUF's matrices kept quantized on the CPU even with --kernels on (an ATen fork of the
  // model will run: bench-forward --kernels both); else they are dropped (src/model/torch_weights.h).
  bool keep_float_weights = false;
};

std::unique_ptr<StepModel> load_llama(const LoadOptions& opt);
// Config of a model path without loading weights (random: presets too).
ModelConfig model_config_of(const std::string& model);
bool is_random_model(const std::string& model);
int cuda_device_count();
// A replica sharing `model`'s weights with its own empty cache, whose CUDA forward uses the kernels (and graphs)
// or not: bench-forward --kernels both times both paths on one set of weights.
std::unique_ptr<StepModel> fork_with_kernels(const StepModel& model, bool kernels, bool graphs);
// Saves a model's weights as a Hugging Face directory (config.json, generation_config.json, model.safetensors).
void save_hf_directory(StepModel& model, const std::string& dir);

}  // namespace la
