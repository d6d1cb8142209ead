// The start-up self-check (--selfcheck on|off|strict): before a model serves, its fast path (the CUDA kernels with
// CUDA graphs, or the CPU kernels) runs a fixed script of random tree steps next to the ATen reference forward
// on the same weights, and the first path that agrees serves. No libtorch here: it works on StepModel.
//
// Why: the CUDA path cannot be run in this project's CI (no GPU). A wrong kernel result would silently change
// tokens and a launch or capture error would kill the request; the self-check turns both into a fallback with a
// reason (or, with strict, one error naming the mismatch) on the first run on a new machine.
//
// The script (selfcheck_script): for each bucket (default 1, 16, 64) three steps, so that a CUDA-graph path goes
// through warm-up (eager), capture and replay; trees with random parents at growing cache lengths; after every
// step one root-to-node path is committed, and the first multi-token step commits a path that is not a prefix of
// the step (the in-place commit kernel); the committed cache is then read by the following steps.
//
// Agreement (selfcheck_tolerance), per step token, with scale = max(1, max |reference logit| of that token):
//   fp32: every |logit difference| <= 1e-3 * scale, and the same argmax id, except where the reference's two best
//         logits are within that tolerance (a near tie, which any reordering of sums may flip);
//   fp16: |difference| <= 2e-2 * scale;  bf16: |difference| <= 6e-2 * scale (argmax not compared: reduced
//         precision flips near ties routinely). An exception from the candidate is a failure too.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lookahead/model/step_model.h"

namespace la {

enum class SelfCheckMode { Off, On, Strict };
// "on" | "off" | "strict"; anything else is an error naming the flag.
SelfCheckMode parse_selfcheck_mode(const std::string& s);
const char* selfcheck_mode_name(SelfCheckMode m);

// A forward configuration: the kernels (CUDA kernels, or the CPU kernels of src/backend/cpu) and CUDA graphs, or neither (ATen).
struct ServingPath {
  bool kernels = false, graphs = false;
  std::string name() const;  // "kernels, graphs" | "kernels" | "ATen forward"
  bool operator==(const ServingPath& o) const { return kernels == o.kernels && graphs == o.graphs; }
};

struct SelfCheckTolerance {
  double rel = 1e-3;          // of max(1, max |reference logit|) of the token
  bool compare_argmax = true;
};
// By --dtype (fp32 | fp16 | bf16; also float32, float16, bfloat16).
SelfCheckTolerance selfcheck_tolerance(const std::string& dtype);

struct SelfCheckStep {
  StepInput step;
  std::vector<int32_t> commit;  // indices into the step, a root-to-node path in order
};
// The random steps for a model of this config (seeded, so every run and every rank checks the same steps).
std::vector<SelfCheckStep> selfcheck_script(const ModelConfig& cfg, const std::vector<int>& buckets, uint64_t seed);

struct SelfCheckAttempt {
  ServingPath path;
  bool ok = false;
  std::string detail;  // "" when ok; else the first mismatch or the error
};

struct SelfCheckReport {
  SelfCheckMode mode = SelfCheckMode::Off;
  std::string model;     // what was checked (the model's description)
  std::vector<SelfCheckAttempt> attempts;
  ServingPath serving;   // the path that serves
  int steps = 0;         // steps in the script
  double seconds = 0;
  // One phrase for the load line and describe(): "selfcheck passed (kernels, graphs)", or
  // "selfcheck: kernels, graphs failed (...); serving kernels".
  std::string summary() const;
  std::string json() const;  // an object: mode, serving, steps, seconds, attempts [{path, ok, detail}]
};

struct SelfCheckOptions {
  SelfCheckMode mode = SelfCheckMode::On;
  std::string dtype = "fp32";
  std::vector<int> buckets{1, 16, 64};
  uint64_t seed = 0x5e1fc4ec;
};

// Builds a model on the given path sharing the weights (the reference: {false, false}). May throw.
using ServingPathFactory = std::function<std::unique_ptr<StepModel>(const ServingPath&)>;

// Runs the script on the reference and on each candidate in order (e.g. {kernels, graphs}, {kernels}); the first
// candidate that agrees serves, else the reference path. Strict: the first failing candidate is an error naming
// the path and the mismatch. Off: nothing runs, candidates.front() serves. The models built here are dropped.
SelfCheckReport run_selfcheck(const ServingPathFactory& make, const std::vector<ServingPath>& candidates,
                              const SelfCheckOptions& opt);

// Fault injection, for tests of the fallback chain (tests/model/test_selfcheck.cpp, tests/scripts): wraps `m` so
// that its forward corrupts one logit (and the id chosen from it) or throws, from forward number `at_forward` on.
enum class SelfCheckFault { None, Corrupt, Throw };
std::unique_ptr<StepModel> inject_fault(std::unique_ptr<StepModel> m, SelfCheckFault f, int at_forward = 2);
// The load hook's form of it: LOOKAHEAD_SELFCHECK_FAULT="graphs=throw,kernels=corrupt" (paths "graphs" = kernels
// with graphs, "kernels" = kernels without) injects into the candidates the self-check builds; unset: `m` as is.
std::unique_ptr<StepModel> selfcheck_fault_for_testing(std::unique_ptr<StepModel> m, const ServingPath& p);

// Every self-check this process ran, in order (the target, then a draft model): --stats-json reports them.
std::vector<SelfCheckReport> selfcheck_reports();

}  // namespace la
