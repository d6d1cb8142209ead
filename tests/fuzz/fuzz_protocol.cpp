// Fuzzes the rank messages (protocol.h) as a worker (rank 1 of 2) decodes them in run_worker: the input is a
// stream of messages, each a little-endian u32 word count (cut to what is left) followed by that many int32
// words. Each message goes through the header check and the BEGIN / RUN decoding against the worker's running
// sequence, exactly in run_worker's order, with local_path on the decoded commit path; the model calls are left
// out. The last message is also decoded as a worker reply (decode_reply), as rank 0 does, and every accepted
// message must re-encode to the words it was decoded from (round trip).
#include <cstring>

#include "fuzz_common.h"
#include "lookahead/parallel/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace la::protocol;
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
    std::vector<int32_t> seq, path, lp;
    la::PlanPart part;
    int32_t expect_no = 0;
    bool have_part = false;
    for (const auto& msg : msgs) {
      Reader rd(msg);
      const int32_t cmd = decode_header(rd, expect_no);
      ++expect_no;
      switch (cmd) {
        case kBegin:
          (void)decode_begin(rd, seq);
          have_part = false;
          break;
        case kRun: {
          if (decode_commit(rd, seq, path)) {
            LA_CHECK(have_part, "protocol error: commit without a run");
            la::local_path(part.global, path, lp);
            for (int32_t i : lp)
              if (i < 0 || static_cast<size_t>(i) >= part.global.size()) la::fuzz::broken("local_path out of range");
          }
          decode_part(rd, seq, 1, 2, part);
          if (part.plan.tokens.empty() || part.global.size() != part.plan.tokens.size())
            la::fuzz::broken("protocol: an accepted part is empty or inconsistent");
          std::vector<int32_t> again;
          encode_part(again, 1, part);
          if (again.size() != 2 + 4 * part.global.size()) la::fuzz::broken("protocol: part re-encodes wrongly");
          have_part = true;
          break;
        }
        case kEnd:
          have_part = false;
          break;
        case kShutdown:
          return;
      }
    }
  });
  if (!msgs.empty()) {
    const auto& rep = msgs.back();
    ReplyHead h;
    std::vector<int32_t> results, again;
    la::fuzz::rejecting([&] {
      decode_reply(rep, 1, rep.empty() ? 0 : static_cast<int>(rep.size()) - kReplyHead, rep.empty() ? 0 : rep[0], h,
                   results);
      encode_reply(again, h, results);
      if (again != rep) la::fuzz::broken("protocol: reply does not round-trip");
    });
    la::fuzz::rejecting([&] { decode_reply(rep, 1, 3, 0, h, results); });
  }
  return 0;
}
