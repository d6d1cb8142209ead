// Fuzzes the Ouroboros phrase pool state file (--pool-state): PhrasePool::load (max 3 phrases per key, so the
// per-key trimming runs). An accepted file must give a pool whose phrases start with their key, and save and
// load back to the same contents.
#include "fuzz_common.h"
#include "lookahead/draft/phrase_pool.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = la::fuzz::write_scratch("pool.state", data, size);
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
    const std::string again = la::fuzz::scratch_dir() + "/pool.saved";
    la::fuzz::must("phrase pool save/load round trip", [&] {
      pool.save(again);
      la::PhrasePool back(3);
      back.load(again);
      if (back.size() != pool.size() || back.keys() != pool.keys()) throw std::runtime_error("contents differ");
    });
  });
  return 0;
}
