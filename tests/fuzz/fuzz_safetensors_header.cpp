// Fuzzes one safetensors file (8-byte header length, JSON header, data section): SafetensorsCheckpoint::add_file.
// After a successful parse every tensor view must be consistent (size = numel x dtype size, dims >= 0) and lie
// inside the mapped file (its first and last bytes are read).
#include "fuzz_common.h"
#include "lookahead/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = la::fuzz::write_scratch("model.safetensors", data, size);
  la::fuzz::rejecting([&] {
    la::SafetensorsCheckpoint ck;
    ck.add_file(path);
    for (const auto& [name, v] : ck.tensors()) {
      int64_t n = 1;
      for (int64_t d : v.shape) {
        if (d < 0) la::fuzz::broken("safetensors: accepted a negative dimension");
        n *= d;
      }
      if (n != v.numel() || v.nbytes != static_cast<size_t>(n) * la::dtype_size(v.dtype))
        la::fuzz::broken("safetensors: view size disagrees with shape and dtype");
      if (v.nbytes > size) la::fuzz::broken("safetensors: view larger than the file");
      if (v.nbytes > 0) {
        const auto* p = static_cast<const volatile uint8_t*>(v.data);
        (void)p[0];
        (void)p[v.nbytes - 1];
      }
    }
  });
  return 0;
}
