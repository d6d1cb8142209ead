// Fuzzes the rank messages (protocol.h) as a worker (rank 1 of 2) decodes them in run_worker: the input is a
// stream of messages, each a little-endian u32 word count (cut to what is left) followed by that many int32
// words. Each message goes through the header check and the BEGIN / RUN decoding against the worker's running
// sequence, exactly in run_worker's order, with local_path on the decoded commit path; the model calls are left
// out. BATCH messages go through the slot ops as serve_batch (src/dist/worker.cpp) decodes them, with per-slot
// sequences and parts. The last message is also decoded as a worker reply (decode_reply) and as a BATCH reply of
// its own item count, as rank 0 does, and every accepted message must re-encode to the words it was decoded from
// (round trip).
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
    std::vector<std::vector<int32_t>> slot_seq;  // BATCH: per slot
    std::vector<la::PlanPart> slot_part;
    std::vector<char> slot_has;
    int32_t expect_no = 0;
    bool have_part = false;
    for (const auto& msg : msgs) {
      Reader rd(msg);
      const int32_t cmd = decode_header(rd, expect_no);
      ++expect_no;
      switch (cmd) {
        case kBegin: {
          int rows = 0;
          (void)decode_begin(rd, seq, rows);
          if (rows < 0 || rows > kMaxStepRows) la::fuzz::broken("protocol: BEGIN accepted out-of-range step rows");
          have_part = false;
          break;
        }
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
        case kBatch: {
          const int ops = decode_batch_ops(rd);
          for (int o = 0; o < ops; ++o) {
            int slot = 0;
            const int32_t op = decode_slot_op(rd, slot);
            if (slot < 0 || slot >= kMaxSlots) la::fuzz::broken("protocol: slot out of range accepted");
            if (static_cast<int>(slot_seq.size()) <= slot) {
              slot_seq.resize(slot + 1);
              slot_part.resize(slot + 1);
              slot_has.resize(slot + 1, 0);
            }
            auto& sq = slot_seq[slot];
            switch (op) {
              case kOpCommit:
                decode_slot_commit(rd, sq, path);
                LA_CHECK(slot_has[slot], "protocol error: commit without a run");
                la::local_path(slot_part[slot].global, path, lp);
                slot_has[slot] = 0;
                break;
              case kOpEnd:
                slot_has[slot] = 0;
                break;
              case kOpBegin: {
                int rows = 0;
                (void)decode_slot_begin(rd, sq, rows);
                if (sq.empty() || rows < 0) la::fuzz::broken("protocol: an accepted slot begin is empty");
                slot_has[slot] = 0;
                break;
              }
              case kOpChunk:
                if (decode_slot_chunk(rd) < 1) la::fuzz::broken("protocol: an empty chunk accepted");
                break;
              case kOpPart:
                decode_slot_part(rd, sq, 1, 2, slot_part[slot]);
                if (slot_part[slot].plan.tokens.empty() ||
                    slot_part[slot].global.size() != slot_part[slot].plan.tokens.size())
                  la::fuzz::broken("protocol: an accepted slot part is empty or inconsistent");
                slot_has[slot] = 1;
                break;
            }
          }
          LA_CHECK(rd.done(), "protocol error: trailing words after the BATCH message's ops");
          break;
        }
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
    // As a BATCH reply: items for slots 0, 1, ... whose result counts are what the message says.
    la::fuzz::rejecting([&] {
      Reader rd(rep);
      int32_t stop = 0, us = 0;
      const int items = rep.size() >= 4 ? rep[3] : 0;
      decode_batch_reply_head(rd, 1, rep.empty() ? 0 : rep[0], items, stop, us);
      encode_batch_reply_head(again, rep[0], stop, us, items);
      BatchItemReply ih;
      for (int i = 0; i < items; ++i) {
        Reader peek = rd;  // the slot and result count rank 0 would expect: the ones the item names
        const int slot = peek.next();
        peek.next();
        peek.next();
        const int nodes = peek.next();
        decode_batch_reply_item(rd, 1, slot, nodes, ih, results);
        encode_batch_reply_item(again, slot, ih.cache_len, ih.step_tokens, results);
      }
      if (rd.done() && again != rep) la::fuzz::broken("protocol: batch reply does not round-trip");
    });
  }
  return 0;
}
