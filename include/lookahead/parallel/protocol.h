// The messages between rank 0 and the workers (lookahead parallelism), each with its encoder and its decoder side
// by side, so a change to one is a change to the other (tests/core/test_protocol.cpp round-trips every message;
// tests/fuzz/fuzz_protocol.cpp feeds the decoders arbitrary words). No libtorch, no MPI: messages are int32 words
// that the replica groups (replica_group.h) move over MPI or NCCL.
//
//   header   : [magic, command, message number]          (numbers count up from 0 per job, checked by workers)
//   BEGIN    : header, step rows, sync(prompt), temperature bits, top_k, top_p bits, seed (2 words), stream (2 words)
//              (step rows: the most input rows a step of the request can give a worker, 0: unknown; the worker
//              sizes its step buffers for them, so a step that first grows the plan allocates nothing)
//   RUN      : header, commit, sync(seq), K, n, n x part  -> every worker: commit, run its part, REPLY
//              commit = [0] (none) or [1, sync(committed seq), path length, global path...]
//              part   = [rank, m, m tokens, m parents, m draft flags, m global ids]
//              Over MPI each worker gets only its own part (n = 1); over NCCL one broadcast holds parts 1..K-1.
//   END      : header                                     -> the request ended
//   SHUTDOWN : header                                     -> leave the worker loop
//   REPLY    : [message number, cache length, forward tokens, forward us, stop signal, results...]
//              (worker -> rank 0; the cache length is the worker's own, after the commit, before the forward)
//   BATCH    : header, op count, op...  (batched steps, --batch under LP: every rank holds every slot's cache)
//              op = [kind, slot, ...], applied in order; nothing may follow the last:
//                COMMIT [sync(committed seq), path length, global path...]   the slot's last parts' accepted path
//                END    []                                                    the slot's request ended
//                BEGIN  [cache rows, sync(prompt), sampling as in BEGIN]      a request starts in the slot
//                CHUNK  [tokens]                   a prompt chunk of the slot (every rank runs it)
//                PART   [sync(seq), K, n, n x part]   the slot's plan parts (every worker gets parts 1..K-1)
//              -> every worker: the ops, then ONE forward over every CHUNK and PART item, then BATCH REPLY
//   BATCH REPLY : [message number, stop signal, forward us, items, per item: slot, cache length, forward tokens,
//                  result count, results...]   (items in the message's CHUNK / PART order; no results for a chunk)
// sync = [kept prefix length, new token count, new tokens...] against the sequence the workers hold (SeqSync), so
// a step usually carries only the accepted tokens.
//
// Every decoder rejects a malformed, truncated or out-of-order message with la::Error("protocol error: ...").
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lookahead/model/step_model.h"
#include "lookahead/parallel/partition.h"

namespace la::protocol {

constexpr int32_t kMagic = 0x4C410003;  // "LA", protocol version 3 (2: BEGIN had no step rows; 1: no BATCH)
enum Cmd : int32_t { kBegin = 1, kRun = 2, kEnd = 3, kShutdown = 4, kBatch = 5 };
// BATCH ops.
enum SlotOp : int32_t { kOpCommit = 1, kOpEnd = 2, kOpBegin = 3, kOpChunk = 4, kOpPart = 5 };
constexpr int kMaxSlots = 4096;       // slot numbers are below this
constexpr int kMaxStepRows = 1 << 16;  // BEGIN's step rows are at most this (a worker reserves them)
constexpr int kBatchReplyHead = 4;    // no, stop signal, forward us, items
constexpr int kBatchItemHead = 4;     // slot, cache length, forward tokens, result count
constexpr int kReplyHead = 5;
const char* cmd_name(int32_t c);

// Bounds-checked reader of one message.
class Reader {
 public:
  explicit Reader(const std::vector<int32_t>& m) : m_(m) {}
  int32_t next();
  int count();  // a count of items that follow (each at least one word)
  void take(int n, std::vector<int32_t>& out);
  void skip(int n);
  uint64_t u64();
  bool done() const { return pos_ == m_.size(); }

 private:
  void need(int n) const;
  const std::vector<int32_t>& m_;
  size_t pos_ = 0;
};

// The sequence the workers hold, as rank 0 last sent it (encoder side of every sync).
struct SeqSync {
  std::vector<int32_t> sent;
  void encode(const std::vector<int32_t>& seq, std::vector<int32_t>& m);
};
void decode_sync(Reader& rd, std::vector<int32_t>& seq);

// Header. encode_* start the message (m is cleared, its capacity kept).
void encode_header(std::vector<int32_t>& m, Cmd cmd, int32_t no);
// Checks the magic and that the number is `expect_no`; returns the command.
int32_t decode_header(Reader& rd, int32_t expect_no);

// BEGIN: the step rows (>= 0), the prompt (replaces the workers' sequence) and the sampling parameters.
void encode_begin(std::vector<int32_t>& m, int32_t no, int step_rows, SeqSync& sync, const std::vector<int32_t>& prompt,
                  const SampleParams& sp);
SampleParams decode_begin(Reader& rd, std::vector<int32_t>& seq, int& step_rows);

// RUN, head: the previous step's commit (committed seq + accepted global path; `commit_seq` == nullptr: none), the
// step's sequence and the part count K. Then `n` parts follow (encode_parts_count, then encode_part n times).
void encode_run_head(std::vector<int32_t>& m, int32_t no, SeqSync& sync, const std::vector<int32_t>* commit_seq,
                     const std::vector<int32_t>& commit_path, const std::vector<int32_t>& seq, int k);
void encode_parts_count(std::vector<int32_t>& m, int n);
// The most words a RUN holds for steps of up to `rows` input rows per replica with `parts` parts in it (a
// commit's new tokens and path, the step's new tokens, 4 words a part row): what both sides reserve.
size_t run_message_words(int rows, int parts);
// The same bound for BATCH messages and replies: each slot's request, up to its cache rows (no sequence, path or
// part of it is longer), adds a commit, a begin and a part (4 words a row per part) to a message, and an item to
// the reply. Both sides note every slot's begin and reserve what the slots begun so far can need at once.
class BatchBound {
 public:
  void begin(int slot, int rows);  // the slot's largest request so far decides its share
  size_t message_words(int parts) const {
    return 64 + per_slot_.size() * 64 + rows_ * (4 + 4 * static_cast<size_t>(parts));
  }
  size_t reply_words() const { return kBatchReplyHead + per_slot_.size() * kBatchItemHead + rows_; }

 private:
  std::vector<int> per_slot_;  // per slot begun: its largest request's rows
  size_t rows_ = 0;            // their sum
};
void encode_part(std::vector<int32_t>& m, int rank, const PlanPart& part);
// Decoder side of the head, in two calls (the worker commits between them): the commit, if any (applied to `seq`,
// the accepted global path into `path`; returns whether there was one) ...
bool decode_commit(Reader& rd, std::vector<int32_t>& seq, std::vector<int32_t>& path);
// ... then the step's sync, K (== ranks) and rank `me`'s part among the included ones into `part` (validated:
// a valid plan, global ids strictly increasing from 0).
void decode_part(Reader& rd, std::vector<int32_t>& seq, int me, int ranks, PlanPart& part);

// BATCH: encode_batch_head starts the message with its op count, then the ops are appended in the order the
// worker applies them. Each slot has its own SeqSync (the sequence the workers hold for it).
void encode_batch_head(std::vector<int32_t>& m, int32_t no, int ops);
// After decode_header: the op count (then decode_slot_op that many times, then the message must be done()).
int decode_batch_ops(Reader& rd);
void encode_slot_commit(std::vector<int32_t>& m, int slot, SeqSync& sync, const std::vector<int32_t>& seq,
                        const std::vector<int32_t>& path);
void encode_slot_end(std::vector<int32_t>& m, int slot);
void encode_slot_begin(std::vector<int32_t>& m, int slot, int rows, SeqSync& sync, const std::vector<int32_t>& prompt,
                       const SampleParams& sp);
void encode_slot_chunk(std::vector<int32_t>& m, int slot, int tokens);
// The slot's sequence and K; then `n` parts (encode_part n times).
void encode_slot_parts(std::vector<int32_t>& m, int slot, SeqSync& sync, const std::vector<int32_t>& seq, int k,
                       int n);
// Decoder side: the next op's kind and slot (validated), then its body by kind.
int32_t decode_slot_op(Reader& rd, int& slot);
void decode_slot_commit(Reader& rd, std::vector<int32_t>& seq, std::vector<int32_t>& path);
SampleParams decode_slot_begin(Reader& rd, std::vector<int32_t>& seq, int& rows);
int decode_slot_chunk(Reader& rd);
// The slot's sequence, K (== ranks) and rank `me`'s part (validated as decode_part's).
void decode_slot_part(Reader& rd, std::vector<int32_t>& seq, int me, int ranks, PlanPart& part);

// BATCH REPLY: the head, then one item per CHUNK / PART op.
void encode_batch_reply_head(std::vector<int32_t>& m, int32_t no, int32_t stop_signal, int32_t forward_us, int items);
void encode_batch_reply_item(std::vector<int32_t>& m, int slot, int cache_len, int step_tokens,
                             const std::vector<int32_t>& results);
struct BatchItemReply {
  int32_t cache_len = 0, step_tokens = 0;
};
// Rank 0: rank r's reply to message `expected_no` of `items` items; returns the head's stop signal and forward us.
void decode_batch_reply_head(Reader& rd, int r, int32_t expected_no, int items, int32_t& stop_signal,
                             int32_t& forward_us);
// The next item: it must be slot `slot` with `nodes` results (0 for a chunk).
void decode_batch_reply_item(Reader& rd, int r, int slot, int nodes, BatchItemReply& h, std::vector<int32_t>& results);

// REPLY.
struct ReplyHead {
  int32_t no = 0;
  int32_t cache_len = 0;    // the worker's cache length when it ran its part
  int32_t step_tokens = 0;  // tokens in its forward
  int32_t forward_us = 0;
  int32_t stop_signal = 0;  // 0, or the SIGINT/SIGTERM the worker received
};
void encode_reply(std::vector<int32_t>& m, const ReplyHead& h, const std::vector<int32_t>& results);
// Rank 0: checks rank r's reply to message `expected_no` for a part of `part_nodes` nodes; fills h and results.
void decode_reply(const std::vector<int32_t>& m, int r, int part_nodes, int32_t expected_no, ReplyHead& h,
                  std::vector<int32_t>& results);

}  // namespace la::protocol
