// The test binary links la_kernels but not la_model, so it compiles the at::Tensor adapters itself (this is
// the one translation unit that does); the tests below exercise the kernels through them.
#include "../../src/model/torch_cuda_ops.cpp"
