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
  encode_begin(m, 5, sync, {1, 2, 3}, sp);
  Reader rd(m);
  EXPECT_EQ(decode_header(rd, 5), kBegin);
  std::vector<int32_t> seq = {4, 4};
  const SampleParams got = decode_begin(rd, seq);
  EXPECT_TRUE(rd.done());
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
    decode_begin(r, s);
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
  encode_begin(m, 0, sync, {1, 2}, SampleParams{});
  auto bad = m;
  bad[0] ^= 1;
  expect_protocol_error([&] { Reader r(bad); decode_header(r, 0); }, "bad magic");
  expect_protocol_error([&] { Reader r(m); decode_header(r, 1); }, "message 0 from rank 0, expected 1");
  bad = m;
  bad[1] = 9;
  expect_protocol_error([&] { Reader r(bad); decode_header(r, 0); }, "unknown command 9");
  bad = m;
  bad[4] = 1000;  // token count beyond the message
  expect_protocol_error([&] { Reader r(bad); decode_header(r, 0); std::vector<int32_t> s; decode_begin(r, s); },
                        "bad count 1000");

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

}  // namespace
}  // namespace la
