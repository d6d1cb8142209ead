// Command message decoding for the workers (see wire.h); moved unchanged out of run_worker.
#include "lookahead/parallel/wire.h"

#include <cstring>

#include "lookahead/util/error.h"

namespace la::wire {

const char* cmd_name(int32_t c) {
  switch (c) {
    case kBegin: return "BEGIN";
    case kRun: return "RUN";
    case kEnd: return "END";
    case kShutdown: return "SHUTDOWN";
    default: return "?";
  }
}

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

int32_t Reader::next() {
  need(1);
  return m_[pos_++];
}

int Reader::count() {
  const int32_t n = next();
  LA_CHECK(n >= 0 && pos_ + static_cast<size_t>(n) <= m_.size(), "protocol error: bad count ", n,
           " in a message from rank 0");
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
  LA_CHECK(n >= 0 && pos_ + static_cast<size_t>(n) <= m_.size(), "protocol error: a message from rank 0 ends ",
           "early (", m_.size(), " words)");
}

void apply_sync(Reader& rd, std::vector<int32_t>& seq) {
  const int32_t keep = rd.next();
  LA_CHECK(keep >= 0 && static_cast<size_t>(keep) <= seq.size(), "protocol error: sync keeps ", keep, " of ",
           seq.size(), " tokens");
  seq.resize(keep);
  const int n = rd.count();
  std::vector<int32_t> add;
  rd.take(n, add);
  seq.insert(seq.end(), add.begin(), add.end());
}

int32_t read_header(Reader& rd, int32_t expect_no) {
  LA_CHECK(rd.next() == kMagic, "protocol error: bad magic from rank 0 (different builds?)");
  const int32_t cmd = rd.next();
  const int32_t no = rd.next();
  LA_CHECK(no == expect_no, "protocol error: message ", no, " from rank 0, expected ", expect_no);
  return cmd;
}

SampleParams read_begin(Reader& rd, std::vector<int32_t>& seq) {
  seq.clear();
  apply_sync(rd, seq);
  SampleParams sp;
  sp.temperature = bits_float(rd.next());
  sp.top_k = rd.next();
  sp.top_p = bits_float(rd.next());
  sp.seed = rd.u64();
  sp.stream = rd.u64();
  return sp;
}

bool read_commit(Reader& rd, std::vector<int32_t>& seq, std::vector<int32_t>& path) {
  if (rd.next() == 0) return false;
  apply_sync(rd, seq);
  rd.take(rd.count(), path);
  return true;
}

PlanPart read_part(Reader& rd, std::vector<int32_t>& seq, int me, int ranks) {
  apply_sync(rd, seq);
  const int k = rd.next();
  LA_CHECK(k == ranks, "protocol error: plan split in ", k, " parts for ", ranks, " ranks");
  PlanPart part;
  bool found = false;
  std::vector<int32_t> tmp;
  const int included = rd.count();
  for (int i = 0; i < included; ++i) {
    const int r = rd.next();
    const int m = rd.count();
    if (r != me) {
      rd.skip(4 * m);
      continue;
    }
    rd.take(m, part.plan.tokens);
    rd.take(m, part.plan.parents);
    rd.take(m, tmp);
    part.plan.verify.assign(tmp.begin(), tmp.end());
    rd.take(m, part.global);
    found = true;
  }
  LA_CHECK(found, "protocol error: no part for rank ", me, " in the RUN message");
  part.plan.validate();
  return part;
}

void check_reply(const std::vector<int32_t>& rep, int r, int part_nodes, int32_t expected_no) {
  LA_CHECK(rep.size() == static_cast<size_t>(kReplyHead + part_nodes), "protocol error: rank ", r, " replied ", rep.size(),
           " words for a part of ", part_nodes, " nodes");
  LA_CHECK(rep[0] == expected_no, "protocol error: rank ", r, " answered message ", rep[0], " (expected ",
           expected_no, ")");
}

}  // namespace la::wire
