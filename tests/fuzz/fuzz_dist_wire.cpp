// Fuzzes the ranks' command messages as a worker (rank 1 of 2) decodes them (wire.h, used by run_worker): the
// input is a stream of messages, each a little-endian u32 word count (cut to what is left) followed by that many
// int32 words. Each message goes through the header check and the BEGIN / RUN decoding against the worker's
// running sequence, exactly in run_worker's order, with local_path on the decoded commit path; the model calls
// are left out. The last message is also checked as a worker reply (check_reply), as rank 0 does.
#include <cstring>

#include "fuzz_common.h"
#include "lookahead/parallel/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace la::wire;
  std::vector<std::vector<int32_t>> msgs;
  size_t off = 0;
  while (off + 4 <= size) {
    uint32_t n;
    std::memcpy(&n, data + off, 4);
    off += 4;
    n = static_cast<uint32_t>(std::min<size_t>(n, (size - off) / 4));
    std::vector<int32_t> m(n);
    if (n) std::memcpy(m.data(), data + off, 4 * size_t(n));
    off += 4 * size_t(n);
    msgs.push_back(std::move(m));
  }
  la::fuzz::rejecting([&] {
    std::vector<int32_t> seq, part_global, path;
    int32_t expect_no = 0;
    bool have_part = false;
    for (const auto& msg : msgs) {
      Reader rd(msg);
      const int32_t cmd = read_header(rd, expect_no);
      ++expect_no;
      switch (cmd) {
        case kBegin:
          (void)read_begin(rd, seq);
          have_part = false;
          break;
        case kRun: {
          if (read_commit(rd, seq, path)) {
            LA_CHECK(have_part, "protocol error: commit without a run");
            const auto lp = la::local_path(part_global, path);
            for (int32_t i : lp)
              if (i < 0 || static_cast<size_t>(i) >= part_global.size()) la::fuzz::broken("local_path out of range");
          }
          la::PlanPart part = read_part(rd, seq, 1, 2);
          if (part.plan.tokens.empty() || part.global.size() != part.plan.tokens.size())
            la::fuzz::broken("wire: an accepted part is empty or inconsistent");
          part_global = std::move(part.global);
          have_part = true;
          break;
        }
        case kEnd:
          have_part = false;
          break;
        case kShutdown:
          return;
        default:
          la::fail("protocol error: unknown command ", cmd, " from rank 0");
      }
    }
  });
  if (!msgs.empty()) {
    const auto& rep = msgs.back();
    la::fuzz::rejecting([&] { la::wire::check_reply(rep, 1, rep.empty() ? 0 : static_cast<int>(rep.size()) - la::wire::kReplyHead, 0); });
    la::fuzz::rejecting([&] { la::wire::check_reply(rep, 1, 3, rep.empty() ? 0 : rep[0]); });
  }
  return 0;
}
