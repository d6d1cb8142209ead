// Fuzzes the suffix strategy's state file (--suffix-state): SuffixGlobal::load with a small byte bound (so
// eviction runs after a load), once with the raw input and once with the input as the body and a correct checksum
// appended (see with_checksum). An accepted file must leave the tree's invariants intact, serve matches and drafts,
// take new outputs, and save and load back.
#include "fuzz_common.h"
#include "lookahead/draft/suffix_state.h"

namespace {
constexpr int kDepth = 8;
constexpr int64_t kBytes = 16 << 10;

void load_and_use(const std::string& path) {
  la::SuffixGlobal g(kDepth, kBytes, 64, 0);
  const std::vector<int32_t> first = {1, 2, 3};
  g.add(first.data(), first.size());
  la::fuzz::rejecting([&] {
    g.load(path);
    la::fuzz::must("suffix tree invariants after load", [&] { g.tree().check_invariants(); });
    la::SuffixDraft d;
    for (const std::vector<int32_t>& ctx : {std::vector<int32_t>{1, 2}, {7, 8, 7}, {0}, {63, 5}}) {
      const auto m = g.tree().match(ctx.data(), ctx.size(), kDepth / 2);
      g.tree().draft(m, 16, 0.05, kDepth, d);
      for (int i = 0; i < d.size(); ++i)
        if (d.parents[i] >= i || d.tokens[i] < 0 || d.tokens[i] >= 64) la::fuzz::broken("suffix draft out of shape");
    }
    const std::vector<int32_t> more = {4, 5, 4, 5, 6};
    g.add(more.data(), more.size());
    la::fuzz::must("suffix tree invariants after use", [&] { g.tree().check_invariants(); });
    la::fuzz::must("suffix state save/load round trip", [&] {
      const std::string again = la::fuzz::scratch_dir() + "/suffix.saved";
      g.save(again);
      la::SuffixGlobal back(kDepth, kBytes, 64, 0);
      back.load(again);
      back.tree().check_invariants();
      if (back.sequences() != g.sequences()) la::fuzz::broken("suffix state round trip lost sequences");
    });
  });
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  load_and_use(la::fuzz::write_scratch("suffix.state", data, size));
  const std::string fixed = la::fuzz::with_checksum(data, size);
  load_and_use(la::fuzz::write_scratch("suffix.state", fixed.data(), fixed.size()));
  return 0;
}
