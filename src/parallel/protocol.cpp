// The rank messages: each encoder next to its decoder (format in protocol.h). Hand-written: the messages are a
// few int32 words moved by MPI/NCCL calls that already take int32 buffers; a serialisation library would add a
// copy per step and a dependency for five message types.
#include "lookahead/parallel/protocol.h"

#include <algorithm>
#include <cstring>

#include "lookahead/util/error.h"

namespace la::protocol {
namespace {

int32_t float_bits(float f) {
  int32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float bits_float(int32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
void put_u64(std::vector<int32_t>& m, uint64_t x) {
  m.push_back(static_cast<int32_t>(x & 0xffffffffu));
  m.push_back(static_cast<int32_t>(x >> 32));
}

}  // namespace

const char* cmd_name(int32_t c) {
  switch (c) {
    case kBegin: return "BEGIN";
    case kRun: return "RUN";
    case kEnd: return "END";
    case kShutdown: return "SHUTDOWN";
    case kBatch: return "BATCH";
    default: return "?";
  }
}

// ------------------------------------------------------------------------------------------------ reader

int32_t Reader::next() {
  need(1);
  return m_[pos_++];
}

int Reader::count() {
  const int32_t n = next();
  LA_CHECK(n >= 0 && pos_ + static_cast<size_t>(n) <= m_.size(), "protocol error: bad count ", n,
           " in a message of ", m_.size(), " words");
  return n;
}

void Reader::take(int n, std::vector<int32_t>& out) {
  need(n);
  out.assign(m_.begin() + pos_, m_.begin() + pos_ + n);
  pos_ += n;
}

void Reader::skip(int n) {
  need(n);
  pos_ += n;
}

uint64_t Reader::u64() {
  const uint32_t lo = static_cast<uint32_t>(next());
  const uint32_t hi = static_cast<uint32_t>(next());
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

void Reader::need(int n) const {
  LA_CHECK(n >= 0 && pos_ + static_cast<size_t>(n) <= m_.size(), "protocol error: a message ends early (",
           m_.size(), " words)");
}

// ------------------------------------------------------------------------------------------------ sync

void SeqSync::encode(const std::vector<int32_t>& seq, std::vector<int32_t>& m) {
  const size_t keep = std::mismatch(sent.begin(), sent.end(), seq.begin(), seq.end()).first - sent.begin();
  m.push_back(static_cast<int32_t>(keep));
  m.push_back(static_cast<int32_t>(seq.size() - keep));
  m.insert(m.end(), seq.begin() + keep, seq.end());
  sent.resize(keep);
  sent.insert(sent.end(), seq.begin() + keep, seq.end());
}

void decode_sync(Reader& rd, std::vector<int32_t>& seq) {
  const int32_t keep = rd.next();
  LA_CHECK(keep >= 0 && static_cast<size_t>(keep) <= seq.size(), "protocol error: sync keeps ", keep, " of ",
           seq.size(), " tokens");
  const int n = rd.count();
  seq.resize(keep);
  for (int i = 0; i < n; ++i) seq.push_back(rd.next());
}

// ------------------------------------------------------------------------------------------------ header

void encode_header(std::vector<int32_t>& m, Cmd cmd, int32_t no) {
  m.clear();
  m.push_back(kMagic);
  m.push_back(cmd);
  m.push_back(no);
}

int32_t decode_header(Reader& rd, int32_t expect_no) {
  LA_CHECK(rd.next() == kMagic, "protocol error: bad magic from rank 0 (different builds?)");
  const int32_t cmd = rd.next();
  const int32_t no = rd.next();
  LA_CHECK(no == expect_no, "protocol error: message ", no, " from rank 0, expected ", expect_no);
  LA_CHECK(cmd >= kBegin && cmd <= kBatch, "protocol error: unknown command ", cmd, " from rank 0");
  return cmd;
}

// ------------------------------------------------------------------------------------------------ BEGIN

namespace {
void put_sample(std::vector<int32_t>& m, const SampleParams& sp) {
  m.push_back(float_bits(sp.temperature));
  m.push_back(sp.top_k);
  m.push_back(float_bits(sp.top_p));
  put_u64(m, sp.seed);
  put_u64(m, sp.stream);
}
SampleParams take_sample(Reader& rd) {
  SampleParams sp;
  sp.temperature = bits_float(rd.next());
  sp.top_k = rd.next();
  sp.top_p = bits_float(rd.next());
  sp.seed = rd.u64();
  sp.stream = rd.u64();
  return sp;
}
}  // namespace

void encode_begin(std::vector<int32_t>& m, int32_t no, int step_rows, SeqSync& sync, const std::vector<int32_t>& prompt,
                  const SampleParams& sp) {
  encode_header(m, kBegin, no);
  m.push_back(step_rows);
  sync.sent.clear();
  sync.encode(prompt, m);
  put_sample(m, sp);
}

SampleParams decode_begin(Reader& rd, std::vector<int32_t>& seq, int& step_rows) {
  step_rows = rd.next();
  LA_CHECK(step_rows >= 0 && step_rows <= kMaxStepRows, "protocol error: BEGIN with ", step_rows, " step rows");
  seq.clear();
  decode_sync(rd, seq);
  LA_CHECK(!seq.empty(), "protocol error: BEGIN with an empty prompt");
  return take_sample(rd);
}

// ------------------------------------------------------------------------------------------------ RUN

void encode_run_head(std::vector<int32_t>& m, int32_t no, SeqSync& sync, const std::vector<int32_t>* commit_seq,
                     const std::vector<int32_t>& commit_path, const std::vector<int32_t>& seq, int k) {
  encode_header(m, kRun, no);
  if (commit_seq) {
    m.push_back(1);
    sync.encode(*commit_seq, m);
    m.push_back(static_cast<int32_t>(commit_path.size()));
    m.insert(m.end(), commit_path.begin(), commit_path.end());
  } else {
    m.push_back(0);
  }
  sync.encode(seq, m);
  m.push_back(k);
}

size_t run_message_words(int rows, int parts) {
  const size_t n = static_cast<size_t>(std::max(rows, 0));
  return 64 + 3 * n + 4 * n * static_cast<size_t>(std::max(parts, 1));
}

void BatchBound::begin(int slot, int rows) {
  if (slot < 0 || rows < 0) return;
  if (per_slot_.size() <= static_cast<size_t>(slot)) per_slot_.resize(static_cast<size_t>(slot) + 1, 0);
  if (rows > per_slot_[slot]) {
    rows_ += static_cast<size_t>(rows - per_slot_[slot]);
    per_slot_[slot] = rows;
  }
}

void encode_parts_count(std::vector<int32_t>& m, int n) { m.push_back(n); }

void encode_part(std::vector<int32_t>& m, int rank, const PlanPart& p) {
  m.push_back(rank);
  m.push_back(p.plan.size());
  m.insert(m.end(), p.plan.tokens.begin(), p.plan.tokens.end());
  m.insert(m.end(), p.plan.parents.begin(), p.plan.parents.end());
  for (uint8_t v : p.plan.draft) m.push_back(v);
  m.insert(m.end(), p.global.begin(), p.global.end());
}

bool decode_commit(Reader& rd, std::vector<int32_t>& seq, std::vector<int32_t>& path) {
  const int32_t flag = rd.next();
  LA_CHECK(flag == 0 || flag == 1, "protocol error: commit flag ", flag);
  if (flag == 0) return false;
  decode_sync(rd, seq);
  rd.take(rd.count(), path);
  return true;
}

namespace {
// The parts of a RUN or a BATCH PART op: the sequence's sync, K, the included parts; rank `me`'s into `part`.
void take_parts(Reader& rd, std::vector<int32_t>& seq, int me, int ranks, PlanPart& part) {
  decode_sync(rd, seq);
  LA_CHECK(!seq.empty(), "protocol error: RUN with an empty sequence");
  const int k = rd.next();
  LA_CHECK(k == ranks, "protocol error: plan split in ", k, " parts for ", ranks, " ranks");
  bool found = false;
  const int included = rd.count();
  for (int i = 0; i < included; ++i) {
    const int r = rd.next();
    const int m = rd.count();
    if (r != me || found) {
      rd.skip(4 * m);
      continue;
    }
    rd.take(m, part.plan.tokens);
    rd.take(m, part.plan.parents);
    part.plan.draft.resize(m);
    for (int j = 0; j < m; ++j) part.plan.draft[j] = static_cast<uint8_t>(rd.next() != 0);
    rd.take(m, part.global);
    found = true;
  }
  LA_CHECK(found, "protocol error: no part for rank ", me, " in the message");
  try {
    part.plan.validate();
  } catch (const Error& e) {
    fail("protocol error: RUN part: ", e.what());
  }
  LA_CHECK(part.global[0] == 0, "protocol error: part does not start with the plan's root");
  for (size_t i = 1; i < part.global.size(); ++i)
    LA_CHECK(part.global[i] > part.global[i - 1], "protocol error: part's global ids not increasing at ", i);
  LA_CHECK(part.plan.tokens[0] == seq.back(), "protocol error: part root ", part.plan.tokens[0],
           " is not the sequence's last token ", seq.back());
}
}  // namespace

void decode_part(Reader& rd, std::vector<int32_t>& seq, int me, int ranks, PlanPart& part) {
  take_parts(rd, seq, me, ranks, part);
  LA_CHECK(rd.done(), "protocol error: trailing words after the RUN message's parts");
}

// ------------------------------------------------------------------------------------------------ BATCH

void encode_batch_head(std::vector<int32_t>& m, int32_t no, int ops) {
  encode_header(m, kBatch, no);
  m.push_back(ops);
}

int decode_batch_ops(Reader& rd) { return rd.count(); }  // every op has at least one word

void encode_slot_commit(std::vector<int32_t>& m, int slot, SeqSync& sync, const std::vector<int32_t>& seq,
                        const std::vector<int32_t>& path) {
  m.push_back(kOpCommit);
  m.push_back(slot);
  sync.encode(seq, m);
  m.push_back(static_cast<int32_t>(path.size()));
  m.insert(m.end(), path.begin(), path.end());
}

void encode_slot_end(std::vector<int32_t>& m, int slot) {
  m.push_back(kOpEnd);
  m.push_back(slot);
}

void encode_slot_begin(std::vector<int32_t>& m, int slot, int rows, SeqSync& sync, const std::vector<int32_t>& prompt,
                       const SampleParams& sp) {
  m.push_back(kOpBegin);
  m.push_back(slot);
  m.push_back(rows);
  sync.sent.clear();
  sync.encode(prompt, m);
  put_sample(m, sp);
}

void encode_slot_chunk(std::vector<int32_t>& m, int slot, int tokens) {
  m.push_back(kOpChunk);
  m.push_back(slot);
  m.push_back(tokens);
}

void encode_slot_parts(std::vector<int32_t>& m, int slot, SeqSync& sync, const std::vector<int32_t>& seq, int k,
                       int n) {
  m.push_back(kOpPart);
  m.push_back(slot);
  sync.encode(seq, m);
  m.push_back(k);
  m.push_back(n);
}

int32_t decode_slot_op(Reader& rd, int& slot) {
  const int32_t kind = rd.next();
  LA_CHECK(kind >= kOpCommit && kind <= kOpPart, "protocol error: unknown BATCH op ", kind);
  slot = rd.next();
  LA_CHECK(slot >= 0 && slot < kMaxSlots, "protocol error: slot ", slot, " out of range");
  return kind;
}

void decode_slot_commit(Reader& rd, std::vector<int32_t>& seq, std::vector<int32_t>& path) {
  decode_sync(rd, seq);
  rd.take(rd.count(), path);
}

SampleParams decode_slot_begin(Reader& rd, std::vector<int32_t>& seq, int& rows) {
  rows = rd.next();
  LA_CHECK(rows >= 0, "protocol error: a slot of ", rows, " cache rows");
  seq.clear();
  decode_sync(rd, seq);
  LA_CHECK(!seq.empty(), "protocol error: BATCH BEGIN with an empty prompt");
  return take_sample(rd);
}

int decode_slot_chunk(Reader& rd) {
  const int c = rd.next();
  LA_CHECK(c >= 1, "protocol error: a prompt chunk of ", c, " tokens");
  return c;
}

void decode_slot_part(Reader& rd, std::vector<int32_t>& seq, int me, int ranks, PlanPart& part) {
  take_parts(rd, seq, me, ranks, part);
}

void encode_batch_reply_head(std::vector<int32_t>& m, int32_t no, int32_t stop_signal, int32_t forward_us, int items) {
  m.clear();
  m.push_back(no);
  m.push_back(stop_signal);
  m.push_back(forward_us);
  m.push_back(items);
}

void encode_batch_reply_item(std::vector<int32_t>& m, int slot, int cache_len, int step_tokens,
                             const std::vector<int32_t>& results) {
  m.push_back(slot);
  m.push_back(cache_len);
  m.push_back(step_tokens);
  m.push_back(static_cast<int32_t>(results.size()));
  m.insert(m.end(), results.begin(), results.end());
}

void decode_batch_reply_head(Reader& rd, int r, int32_t expected_no, int items, int32_t& stop_signal,
                             int32_t& forward_us) {
  const int32_t no = rd.next();
  LA_CHECK(no == expected_no, "protocol error: rank ", r, " answered message ", no, " (expected ", expected_no, ")");
  stop_signal = rd.next();
  forward_us = rd.next();
  const int32_t n = rd.next();
  LA_CHECK(forward_us >= 0, "protocol error: rank ", r, " replied a negative forward time");
  LA_CHECK(n == items, "protocol error: rank ", r, " replied ", n, " items for a step of ", items);
}

void decode_batch_reply_item(Reader& rd, int r, int slot, int nodes, BatchItemReply& h, std::vector<int32_t>& results) {
  const int32_t s = rd.next();
  LA_CHECK(s == slot, "protocol error: rank ", r, " replied for slot ", s, " where slot ", slot, " was expected");
  h.cache_len = rd.next();
  h.step_tokens = rd.next();
  LA_CHECK(h.cache_len >= 0 && h.step_tokens >= 0, "protocol error: rank ", r, " replied a negative count");
  const int n = rd.count();
  LA_CHECK(n == nodes, "protocol error: rank ", r, " replied ", n, " results for slot ", slot, "'s part of ", nodes,
           " nodes");
  rd.take(n, results);
}

// ------------------------------------------------------------------------------------------------ REPLY

void encode_reply(std::vector<int32_t>& m, const ReplyHead& h, const std::vector<int32_t>& results) {
  m.clear();
  m.push_back(h.no);
  m.push_back(h.cache_len);
  m.push_back(h.step_tokens);
  m.push_back(h.forward_us);
  m.push_back(h.stop_signal);
  m.insert(m.end(), results.begin(), results.end());
}

void decode_reply(const std::vector<int32_t>& m, int r, int part_nodes, int32_t expected_no, ReplyHead& h,
                  std::vector<int32_t>& results) {
  LA_CHECK(part_nodes >= 1 && m.size() == static_cast<size_t>(kReplyHead + part_nodes), "protocol error: rank ", r,
           " replied ", m.size(), " words for a part of ", part_nodes, " nodes");
  LA_CHECK(m[0] == expected_no, "protocol error: rank ", r, " answered message ", m[0], " (expected ", expected_no,
           ")");
  h.no = m[0];
  h.cache_len = m[1];
  h.step_tokens = m[2];
  h.forward_us = m[3];
  h.stop_signal = m[4];
  LA_CHECK(h.cache_len >= 0 && h.step_tokens >= 0 && h.forward_us >= 0, "protocol error: rank ", r,
           " replied a negative count");
  results.assign(m.begin() + kReplyHead, m.end());
}

}  // namespace la::protocol
