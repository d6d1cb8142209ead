// The load options' one check, and the --selfcheck values: no libtorch here, so the CLI's option code links them
// without the engine (tests/fuzz: fuzz_generate_config compiles this file beside src/cli's option files).
#include <string>

#include "lookahead/engine/llama.h"
#include "lookahead/engine/selfcheck.h"
#include "lookahead/model/dtype.h"
#include "lookahead/util/error.h"

namespace la {

SelfCheckMode parse_selfcheck_mode(const std::string& s) {
  if (s == "on") return SelfCheckMode::On;
  if (s == "off") return SelfCheckMode::Off;
  if (s == "strict") return SelfCheckMode::Strict;
  fail("invalid --selfcheck '", s, "' (expected on, off or strict)");
}

void LoadOptions::validate() const {
  (void)parse_dtype_name(dtype);
  LA_CHECK(device == "cpu" || device == "cuda", "invalid --device '", device, "' (expected cpu or cuda)");
  LA_CHECK(threads >= 0, "--threads must be >= 0");
  LA_CHECK(kernels == "on" || kernels == "off", "invalid --kernels '", kernels, "' (expected on or off)");
  LA_CHECK(cuda_gemm == "fixed" || cuda_gemm == "cublas", "invalid --cuda-gemm '", cuda_gemm,
           "' (expected fixed or cublas)");
  if (!selfcheck.empty()) parse_selfcheck_mode(selfcheck);
}

}  // namespace la
