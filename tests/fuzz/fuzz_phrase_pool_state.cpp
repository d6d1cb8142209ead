// Fuzzes the Ouroboros phrase pool state file (--pool-state): PhrasePool::load (max 3 phrases per key, so the
// per-key trimming runs), once with the raw input and once with the input as the body and a correct checksum
// appended (see with_checksum). An accepted file must give a pool whose phrases start with their key, at most 3
// per key, and save and load back to the same contents.
#include "fuzz_common.h"
#include "lookahead/draft/phrase_pool.h"

namespace {
void load_and_use(const std::string& path) {
  la::PhrasePool pool(3);
  pool.insert({5, 6, 7});
  la::fuzz::rejecting([&] {
    pool.load(path);
    size_t seen = 0;
    for (int32_t key : {0, 1, 2, 5, 100, -1}) {
      for (const auto& ph : pool.lookup(key, -1)) {
        if (ph.empty() || ph[0] != key) la::fuzz::broken("phrase pool: a phrase under the wrong key");
        ++seen;
      }
      if (pool.lookup(key, -1).size() > 3) la::fuzz::broken("phrase pool: more than max_per_key phrases");
    }
    if (seen > pool.size()) la::fuzz::broken("phrase pool: size() undercounts");
    pool.insert({1, 2});
    pool.replace({1, 2}, {2, 1});
    la::fuzz::must("phrase pool save/load round trip", [&] {
      const std::string again = la::fuzz::scratch_dir() + "/pool.saved";
      pool.save(again);
      la::PhrasePool back(3);
      back.load(again);
      if (back.size() != pool.size() || back.keys() != pool.keys()) throw std::runtime_error("contents differ");
    });
  });
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  load_and_use(la::fuzz::write_scratch("pool.state", data, size));
  const std::string fixed = la::fuzz::with_checksum(data, size);
  load_and_use(la::fuzz::write_scratch("pool.state", fixed.data(), fixed.size()));
  return 0;
}
