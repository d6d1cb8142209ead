// The rank messages (protocol.h): every message round-trips through its encoder and decoder, and every truncated
// or corrupted message is rejected with a "protocol error" la::Error (never a crash or a silent misread).
#include <gtest/gtest.h>

#include <functional>

#include "lookahead/parallel/protocol.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

using namespace protocol;

PlanPart sample_part() {
  PlanPart p;
  p.plan.reset(11);
  p.plan.add(20, 0, true);
  p.plan.add(21, 1, true);
  p.plan.add(30, 0, false);
  p.global = {0, 2, 5, 9};
  return p;
}

// Every prefix of `m` shorter than the whole, and `m` with one word changed where that must be noticed, throw.
void expect_rejects_truncation(const std::vector<int32_t>& m, const std::function<void(const std::vector<int32_t>&)>& decode) {
  for (size_t n = 0; n < m.size(); ++n) {
    const std::vector<int32_t> cut(m.begin(), m.begin() + n);
    try {
      decode(cut);
      ADD_FAILURE() << "a message cut to " << n << " of " << m.size() << " words was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("protocol error"), std::string::npos) << e.what();
    }
  }
}

void expect_protocol_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "accepted (expected '" << part << "')";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("protocol error"), std::string::npos) << m;
    EXPECT_NE(m.find(part), std::string::npos) << m;
  }
}

TEST(Protocol, BeginRoundTrip) {
  SeqSync sync;
  sync.sent = {9, 9, 9};  // BEGIN starts a fresh sequence whatever was sent before
  SampleParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 40;
  sp.top_p = 0.9f;
  sp.seed = 0x123456789abcdefull;
  sp.stream = 77;
  std::vector<int32_t> m;
  encode_begin(m, 5, 37, sync, {1, 2, 3}, sp);
  Reader rd(m);
  EXPECT_EQ(decode_header(rd, 5), kBegin);
  std::vector<int32_t> seq = {4, 4};
  int rows = -1;
  const SampleParams got = decode_begin(rd, seq, rows);
  EXPECT_TRUE(rd.done());
  EXPECT_EQ(rows, 37);
  EXPECT_EQ(seq, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(sync.sent, seq);
  EXPECT_EQ(got.temperature, sp.temperature);
  EXPECT_EQ(got.top_k, sp.top_k);
  EXPECT_EQ(got.top_p, sp.top_p);
  EXPECT_EQ(got.seed, sp.seed);
  EXPECT_EQ(got.stream, sp.stream);
  expect_rejects_truncation(m, [](const std::vector<int32_t>& c) {
    Reader r(c);
    decode_header(r, 5);
    std::vector<int32_t> s;
    int rows = 0;
    decode_begin(r, s, rows);
  });
}

// A RUN as a worker decodes it: commit (optional) then its part.
struct DecodedRun {
  bool had_commit = false;
  std::vector<int32_t> commit_seq, path, seq;
  PlanPart part;
};
DecodedRun decode_run(const std::vector<int32_t>& m, int32_t no, std::vector<int32_t> worker_seq, int me, int k) {
  DecodedRun d;
  Reader rd(m);
  EXPECT_EQ(decode_header(rd, no), kRun);
  d.had_commit = decode_commit(rd, worker_seq, d.path);
  d.commit_seq = worker_seq;
  decode_part(rd, worker_seq, me, k, d.part);
  d.seq = worker_seq;
  return d;
}

TEST(Protocol, RunRoundTripPerRankAndBroadcast) {
  const PlanPart part = sample_part();
  PlanPart other = sample_part();
  other.global = {0, 1, 3, 4};
  const std::vector<int32_t> prompt = {5, 6, 7}, committed = {5, 6, 7, 8}, seq = {5, 6, 7, 8, 11};
  const std::vector<int32_t> path = {0, 2};
  for (bool with_commit : {false, true}) {
    for (bool broadcast : {false, true}) {
      SCOPED_TRACE(testing::Message() << "commit " << with_commit << " broadcast " << broadcast);
      SeqSync sync;
      sync.sent = prompt;
      std::vector<int32_t> m;
      encode_run_head(m, 3, sync, with_commit ? &committed : nullptr, path, seq, 3);
      if (broadcast) {
        encode_parts_count(m, 2);
        encode_part(m, 1, other);
        encode_part(m, 2, part);
      } else {
        encode_parts_count(m, 1);
        encode_part(m, 2, part);
      }
      EXPECT_EQ(sync.sent, seq);
      const DecodedRun d = decode_run(m, 3, prompt, 2, 3);
      EXPECT_EQ(d.had_commit, with_commit);
      if (with_commit) {
        EXPECT_EQ(d.commit_seq, committed);
        EXPECT_EQ(d.path, path);
      }
      EXPECT_EQ(d.seq, seq);
      EXPECT_EQ(d.part.plan.tokens, part.plan.tokens);
      EXPECT_EQ(d.part.plan.parents, part.plan.parents);
      EXPECT_EQ(d.part.plan.draft, part.plan.draft);
      EXPECT_EQ(d.part.global, part.global);
      expect_rejects_truncation(m, [&](const std::vector<int32_t>& c) { decode_run(c, 3, prompt, 2, 3); });
    }
  }
}

TEST(Protocol, EndShutdownRoundTrip) {
  for (Cmd c : {kEnd, kShutdown}) {
    std::vector<int32_t> m;
    encode_header(m, c, 12);
    Reader rd(m);
    EXPECT_EQ(decode_header(rd, 12), c);
    EXPECT_TRUE(rd.done());
    expect_rejects_truncation(m, [](const std::vector<int32_t>& x) {
      Reader r(x);
      decode_header(r, 12);
    });
  }
}

TEST(Protocol, ReplyRoundTrip) {
  ReplyHead h{4, 57, 9, 1234, 15};
  const std::vector<int32_t> results = {20, 21, 22};
  std::vector<int32_t> m;
  encode_reply(m, h, results);
  ReplyHead g;
  std::vector<int32_t> got;
  decode_reply(m, 1, 3, 4, g, got);
  EXPECT_EQ(got, results);
  EXPECT_EQ(g.no, 4);
  EXPECT_EQ(g.cache_len, 57);
  EXPECT_EQ(g.step_tokens, 9);
  EXPECT_EQ(g.forward_us, 1234);
  EXPECT_EQ(g.stop_signal, 15);
  expect_rejects_truncation(m, [&](const std::vector<int32_t>& c) { decode_reply(c, 1, 3, 4, g, got); });
  expect_protocol_error([&] { decode_reply(m, 1, 3, 5, g, got); }, "rank 1 answered message 4 (expected 5)");
  // A short message checked against a negative part size (as the fuzz target found) is refused, not read.
  expect_protocol_error([&] { decode_reply({1, 2}, 1, -3, 1, g, got); }, "rank 1 replied 2 words for a part of -3");
  auto neg = m;
  neg[1] = -1;
  expect_protocol_error([&] { decode_reply(neg, 1, 3, 4, g, got); }, "negative");
}

TEST(Protocol, CorruptMessagesAreRejected) {
  SeqSync sync;
  std::vector<int32_t> m;
  encode_begin(m, 0, 8, sync, {1, 2}, SampleParams{});
  int rows = 0;
  auto bad = m;
  bad[0] ^= 1;
  expect_protocol_error([&] { Reader r(bad); decode_header(r, 0); }, "bad magic");
  expect_protocol_error([&] { Reader r(m); decode_header(r, 1); }, "message 0 from rank 0, expected 1");
  bad = m;
  bad[1] = 9;
  expect_protocol_error([&] { Reader r(bad); decode_header(r, 0); }, "unknown command 9");
  bad = m;
  bad[5] = 1000;  // token count beyond the message
  expect_protocol_error([&] { Reader r(bad); decode_header(r, 0); std::vector<int32_t> s; decode_begin(r, s, rows); },
                        "bad count 1000");
  for (const int32_t n : {-1, kMaxStepRows + 1}) {  // step rows a worker must not reserve
    bad = m;
    bad[3] = n;
    expect_protocol_error([&] { Reader r(bad); decode_header(r, 0); std::vector<int32_t> s; decode_begin(r, s, rows); },
                          "BEGIN with " + std::to_string(n) + " step rows");
  }

  // RUN: wrong K, no part for this rank, a part whose parents are invalid, non-increasing global ids.
  const std::vector<int32_t> seq = {1, 2, 11};
  auto run_msg = [&](const PlanPart& p, int rank, int k) {
    SeqSync s;
    std::vector<int32_t> r;
    encode_run_head(r, 1, s, nullptr, {}, seq, k);
    encode_parts_count(r, 1);
    encode_part(r, rank, p);
    return r;
  };
  const PlanPart good = sample_part();
  expect_protocol_error([&] { decode_run(run_msg(good, 1, 3), 1, {}, 1, 2); }, "plan split in 3 parts for 2 ranks");
  expect_protocol_error([&] { decode_run(run_msg(good, 2, 2), 1, {}, 1, 2); }, "no part for rank 1");
  PlanPart dec = good;
  dec.global = {0, 5, 2, 9};
  expect_protocol_error([&] { decode_run(run_msg(dec, 1, 2), 1, {}, 1, 2); }, "global ids not increasing");
  PlanPart wrong_root = good;
  wrong_root.plan.tokens[0] = 3;
  expect_protocol_error([&] { decode_run(run_msg(wrong_root, 1, 2), 1, {}, 1, 2); }, "is not the sequence's last");
  auto trailing = run_msg(good, 1, 2);
  trailing.push_back(0);
  expect_protocol_error([&] { decode_run(trailing, 1, {}, 1, 2); }, "trailing words");
  // A sync that keeps more tokens than the worker holds.
  auto keep = run_msg(good, 1, 2);
  keep[4] = 50;
  expect_protocol_error([&] { decode_run(keep, 1, {}, 1, 2); }, "sync keeps 50 of 0 tokens");
}

// BATCH (batched steps): ops for several slots in the order a worker applies them, against its per-slot sequences.
struct DecodedBatch {
  std::vector<int32_t> ops;  // kinds in order
  std::vector<std::vector<int32_t>> seq = std::vector<std::vector<int32_t>>(3);
  std::vector<int32_t> committed, path;
  int rows = 0, chunk = 0;
  SampleParams sp;
  PlanPart part;
};
DecodedBatch decode_batch(const std::vector<int32_t>& m, int32_t no, const std::vector<int32_t>& slot2, int me, int k) {
  DecodedBatch d;
  d.seq[2] = slot2;
  Reader rd(m);
  EXPECT_EQ(decode_header(rd, no), kBatch);
  const int ops = decode_batch_ops(rd);
  for (int o = 0; o < ops; ++o) {
    int slot = 0;
    const int32_t op = decode_slot_op(rd, slot);
    LA_CHECK(slot < 3, "protocol error: test slot ", slot);
    d.ops.push_back(op * 10 + slot);
    switch (op) {
      case kOpCommit: decode_slot_commit(rd, d.seq[slot], d.path); d.committed = d.seq[slot]; break;
      case kOpEnd: break;
      case kOpBegin: d.sp = decode_slot_begin(rd, d.seq[slot], d.rows); break;
      case kOpChunk: d.chunk = decode_slot_chunk(rd); break;
      case kOpPart: decode_slot_part(rd, d.seq[slot], me, k, d.part); break;
    }
  }
  LA_CHECK(rd.done(), "protocol error: trailing words after the BATCH message's ops");
  return d;
}

TEST(Protocol, BatchRoundTrip) {
  const std::vector<int32_t> prompt2 = {5, 6, 7}, committed = {5, 6, 7, 8}, seq2 = {5, 6, 7, 8, 11};
  const std::vector<int32_t> path = {0, 2}, prompt0 = {1, 2, 3, 4};
  const PlanPart part = sample_part();
  PlanPart other = sample_part();
  other.global = {0, 1, 3, 4};
  SampleParams sp;
  sp.temperature = 0.5f;
  sp.top_k = 7;
  sp.seed = 99;
  sp.stream = 3;
  std::vector<SeqSync> sync(3);
  sync[2].sent = prompt2;  // the workers hold slot 2's prompt
  std::vector<int32_t> m;
  encode_batch_head(m, 7, 5);
  encode_slot_commit(m, 2, sync[2], committed, path);
  encode_slot_end(m, 0);
  encode_slot_begin(m, 0, 64, sync[0], prompt0, sp);
  encode_slot_chunk(m, 0, 2);
  encode_slot_parts(m, 2, sync[2], seq2, 3, 2);
  encode_part(m, 1, other);
  encode_part(m, 2, part);
  EXPECT_EQ(sync[2].sent, seq2);
  EXPECT_EQ(sync[0].sent, prompt0);
  const DecodedBatch d = decode_batch(m, 7, prompt2, 2, 3);
  EXPECT_EQ(d.ops, (std::vector<int32_t>{kOpCommit * 10 + 2, kOpEnd * 10, kOpBegin * 10, kOpChunk * 10,
                                         kOpPart * 10 + 2}));
  EXPECT_EQ(d.committed, committed);
  EXPECT_EQ(d.path, path);
  EXPECT_EQ(d.seq[0], prompt0);
  EXPECT_EQ(d.rows, 64);
  EXPECT_EQ(d.sp.temperature, sp.temperature);
  EXPECT_EQ(d.sp.top_k, sp.top_k);
  EXPECT_EQ(d.sp.seed, sp.seed);
  EXPECT_EQ(d.sp.stream, sp.stream);
  EXPECT_EQ(d.chunk, 2);
  EXPECT_EQ(d.seq[2], seq2);
  EXPECT_EQ(d.part.plan.tokens, part.plan.tokens);
  EXPECT_EQ(d.part.plan.parents, part.plan.parents);
  EXPECT_EQ(d.part.global, part.global);
  EXPECT_EQ(decode_batch(m, 7, prompt2, 1, 3).part.global, other.global);
  expect_rejects_truncation(m, [&](const std::vector<int32_t>& c) { decode_batch(c, 7, prompt2, 2, 3); });
  auto longer = m;
  longer.push_back(0);
  expect_protocol_error([&] { decode_batch(longer, 7, prompt2, 2, 3); }, "trailing words");

  // Corrupt ops: an unknown kind, a slot out of range, an empty chunk, negative rows, no part for the rank.
  auto with = [&](size_t at, int32_t v) {
    auto b = m;
    b[at] = v;
    return b;
  };
  const size_t op0 = 4;  // the first op's kind
  expect_protocol_error([&] { decode_batch(with(op0, 9), 7, prompt2, 2, 3); }, "unknown BATCH op 9");
  expect_protocol_error([&] { decode_batch(with(op0 + 1, -1), 7, prompt2, 2, 3); }, "slot -1 out of range");
  expect_protocol_error([&] { decode_batch(with(op0 + 1, kMaxSlots), 7, prompt2, 2, 3); }, "out of range");
  std::vector<int32_t> c;
  encode_batch_head(c, 0, 1);
  encode_slot_chunk(c, 1, 0);
  expect_protocol_error([&] { decode_batch(c, 0, {}, 1, 2); }, "a prompt chunk of 0 tokens");
  SeqSync s0;
  encode_batch_head(c, 0, 1);
  encode_slot_begin(c, 1, -5, s0, prompt0, sp);
  expect_protocol_error([&] { decode_batch(c, 0, {}, 1, 2); }, "-5 cache rows");
  expect_protocol_error([&] { decode_batch(m, 7, prompt2, 2, 4); }, "plan split in 3 parts for 4 ranks");
  SeqSync s2;
  s2.sent = prompt2;
  encode_batch_head(c, 0, 1);
  encode_slot_parts(c, 2, s2, seq2, 2, 1);
  encode_part(c, 1, part);
  expect_protocol_error([&] { decode_batch(c, 0, prompt2, 2, 2); }, "no part for rank 2");
}

TEST(Protocol, BatchReplyRoundTrip) {
  std::vector<int32_t> m;
  encode_batch_reply_head(m, 5, 15, 1234, 2);
  encode_batch_reply_item(m, 3, 40, 6, {});            // a chunk
  encode_batch_reply_item(m, 1, 17, 9, {20, 21, 22});  // a part of 3 nodes
  auto decode = [](const std::vector<int32_t>& x, int32_t no, int items, int slot1, int nodes1) {
    Reader rd(x);
    int32_t stop = 0, us = 0;
    decode_batch_reply_head(rd, 1, no, items, stop, us);
    EXPECT_EQ(stop, 15);
    EXPECT_EQ(us, 1234);
    BatchItemReply h;
    std::vector<int32_t> res;
    decode_batch_reply_item(rd, 1, 3, 0, h, res);
    EXPECT_EQ(h.cache_len, 40);
    EXPECT_TRUE(res.empty());
    decode_batch_reply_item(rd, 1, slot1, nodes1, h, res);
    EXPECT_EQ(h.cache_len, 17);
    EXPECT_EQ(h.step_tokens, 9);
    EXPECT_EQ(res, (std::vector<int32_t>{20, 21, 22}));
    LA_CHECK(rd.done(), "protocol error: trailing words");
  };
  decode(m, 5, 2, 1, 3);
  expect_rejects_truncation(m, [&](const std::vector<int32_t>& c) { decode(c, 5, 2, 1, 3); });
  expect_protocol_error([&] { decode(m, 6, 2, 1, 3); }, "rank 1 answered message 5 (expected 6)");
  expect_protocol_error([&] { decode(m, 5, 3, 1, 3); }, "rank 1 replied 2 items for a step of 3");
  expect_protocol_error([&] { decode(m, 5, 2, 2, 3); }, "rank 1 replied for slot 1 where slot 2 was expected");
  expect_protocol_error([&] { decode(m, 5, 2, 1, 4); }, "replied 3 results for slot 1's part of 4 nodes");
  auto neg = m;
  neg[5] = -1;  // the first item's cache length
  expect_protocol_error([&] { decode(neg, 5, 2, 1, 3); }, "negative");
}

}  // namespace
}  // namespace la
