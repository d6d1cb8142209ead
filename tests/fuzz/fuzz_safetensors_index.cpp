// Fuzzes model.safetensors.index.json (the sharded checkpoint's weight_map): SafetensorsCheckpoint::open on a
// directory that holds the fuzzed index next to two small valid shards (a.safetensors: "x", "y";
// b.safetensors: "z"), so weight maps that name existing shards get past the file checks.
#include <cstring>

#include "fuzz_common.h"
#include "lookahead/model/safetensors.h"

namespace {

std::string shard(const std::string& header_json, size_t body) {
  std::string s(8, '\0');
  const uint64_t n = header_json.size();
  std::memcpy(s.data(), &n, 8);
  return s + header_json + std::string(body, '\x01');
}

const std::string& model_dir() {
  static const std::string dir = [] {
    const std::string d = la::fuzz::scratch_dir() + "/model";
    std::filesystem::create_directories(d);
    const std::string a = shard(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("y":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]}})", 12);
    const std::string b = shard(R"({"__metadata__":{"format":"pt"},"z":{"dtype":"F16","shape":[3],)"
                                R"("data_offsets":[0,6]}})", 6);
    la::fuzz::write_scratch("model/a.safetensors", a.data(), a.size());
    la::fuzz::write_scratch("model/b.safetensors", b.data(), b.size());
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = model_dir();
  la::fuzz::write_scratch("model/model.safetensors.index.json", data, size);
  la::fuzz::rejecting([&] {
    auto ck = la::SafetensorsCheckpoint::open(dir);
    for (const auto& [name, v] : ck.tensors())
      if (name != "x" && name != "y" && name != "z") la::fuzz::broken("index: a tensor no shard holds");
  });
  return 0;
}
