// load_llama with the few options the model tests vary (tests/common/).
#pragma once
#include <memory>
#include <string>

#include "lookahead/engine/llama.h"

namespace la::test {

inline std::unique_ptr<StepModel> load_model(const std::string& model, const std::string& dtype,
                                             const std::string& kernels = "on", int threads = 1) {
  LoadOptions o;
  o.model = model;
  o.dtype = dtype;
  o.kernels = kernels;
  o.threads = threads;
  return load_llama(o);
}

}  // namespace la::test
