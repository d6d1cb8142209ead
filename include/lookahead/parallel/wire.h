// The ranks' command messages (protocol in dist_executor.h): constants shared by the encoder (DistExecutor) and
// bounds-checked decoding for the workers, split out of dist_executor.cpp so the decoding runs without MPI or a
// model (tests/fuzz/fuzz_dist_wire.cpp feeds it arbitrary words). Every malformed message throws la::Error
// ("protocol error: ..."). No libtorch, no MPI.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lookahead/parallel/partition.h"
#include "lookahead/model/step_model.h"

namespace la::wire {

constexpr int32_t kMagic = 0x4C410001;  // "LA", protocol version 1
enum Cmd : int32_t { kBegin = 1, kRun = 2, kEnd = 3, kShutdown = 4 };
constexpr int kReplyHead = 5;  // RUN reply: [seq no, cache before, forward tokens, forward us, stop signal]
const char* cmd_name(int32_t c);

int32_t float_bits(float f);
float bits_float(int32_t b);

// Bounds-checked reader of a command message.
class Reader {
 public:
  explicit Reader(const std::vector<int32_t>& m) : m_(m) {}
  int32_t next();
  int count();  // a count of items that follow (each at least one word)
  void take(int n, std::vector<int32_t>& out);
  void skip(int n);
  uint64_t u64();

 private:
  void need(int n) const;
  const std::vector<int32_t>& m_;
  size_t pos_ = 0;
};

// Applies a seq sync [keep, n, tokens...] to a worker's sequence.
void apply_sync(Reader& rd, std::vector<int32_t>& seq);
// [magic, command, sequence number]: checks the magic and that the number is `expect_no`; returns the command.
int32_t read_header(Reader& rd, int32_t expect_no);
// BEGIN payload: the prompt (replaces `seq`) and the sampling parameters.
SampleParams read_begin(Reader& rd, std::vector<int32_t>& seq);
// RUN, first section: the commit of the previous step, if any (applied to `seq`; the accepted global path into
// `path`). Returns whether there was one.
bool read_commit(Reader& rd, std::vector<int32_t>& seq, std::vector<int32_t>& path);
// RUN, second section: the step's sequence sync and this rank's part (validated) among the included parts.
PlanPart read_part(Reader& rd, std::vector<int32_t>& seq, int me, int ranks);
// Rank 0: checks rank r's reply [sequence number, cache length, forward tokens, forward us, stop signal,
// results...] to a
// part of `part_nodes` nodes.
void check_reply(const std::vector<int32_t>& rep, int r, int part_nodes, int32_t expected_no);

}  // namespace la::wire
