// The worker loop (worker.h): decode rank 0's command, apply it to this rank's replica, reply to RUN and BATCH.
#include "lookahead/dist/worker.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "lookahead/parallel/protocol.h"
#include "lookahead/parallel/slot_replica.h"
#include "lookahead/util/clock.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

// A worker's batch slots (BATCH messages): its SlotReplica plus, per slot, the sequence rank 0 synced and the
// part it ran last (for the commit that arrives with the next message).
struct WorkerSlots {
  explicit WorkerSlots(StepModel& model) : rep(model) {}
  SlotReplica rep;
  std::vector<std::vector<int32_t>> seq;
  std::vector<PlanPart> part;
  std::vector<char> has_part;
  std::vector<int32_t> path, local_p;
  protocol::BatchBound bound;  // the messages and replies the slots begun so far can need
  void grow(int slot) {
    if (static_cast<int>(seq.size()) > slot) return;
    seq.resize(slot + 1);
    part.resize(slot + 1);
    has_part.resize(slot + 1, 0);
  }
  // A slot's buffers for a request of up to `rows` cache rows (as SlotReplica sizes its step buffers: no part,
  // path or sequence of the slot outgrows them).
  void reserve(int slot, int rows) {
    const size_t n = static_cast<size_t>(std::max(rows, 1));
    seq[slot].reserve(n + 1);
    part[slot].plan.reserve(rows);
    part[slot].global.reserve(n);
    path.reserve(n);
    local_p.reserve(n);
  }
};

// Applies one BATCH message's ops, runs its items in one forward and encodes the reply.
void serve_batch(protocol::Reader& rd, WorkerSlots& w, int me, int ranks, int32_t no, int32_t stop,
                 std::vector<int32_t>& reply) {
  using namespace protocol;
  w.rep.clear();
  const int ops = decode_batch_ops(rd);
  for (int o = 0; o < ops; ++o) {
    int slot = 0;
    const int32_t op = decode_slot_op(rd, slot);
    w.grow(slot);
    std::vector<int32_t>& seq = w.seq[slot];
    switch (op) {
      case kOpCommit:
        decode_slot_commit(rd, seq, w.path);
        LA_CHECK(w.has_part[slot], "protocol error: slot ", slot, " commit without a run");
        local_path(w.part[slot].global, w.path, w.local_p);
        w.rep.commit(slot, seq, w.local_p);
        w.has_part[slot] = 0;
        break;
      case kOpEnd:
        w.rep.end(slot);
        w.has_part[slot] = 0;
        break;
      case kOpBegin: {
        int rows = 0;
        const SampleParams sp = decode_slot_begin(rd, seq, rows);
        w.rep.begin(slot, seq, sp, rows);
        w.reserve(slot, rows);
        w.bound.begin(slot, rows);
        w.has_part[slot] = 0;
        break;
      }
      case kOpChunk:
        w.rep.stage_chunk(slot, seq, decode_slot_chunk(rd));
        break;
      case kOpPart:
        decode_slot_part(rd, seq, me, ranks, w.part[slot]);
        w.rep.stage_part(slot, seq, w.part[slot].plan);
        w.has_part[slot] = 1;
        break;
    }
  }
  LA_CHECK(rd.done(), "protocol error: trailing words after the BATCH message's ops");
  const double f = w.rep.forward();
  encode_batch_reply_head(reply, no, stop, static_cast<int32_t>(std::min(f * 1e6, 2.0e9)), w.rep.items());
  for (int i = 0; i < w.rep.items(); ++i) {
    const SlotReplica::Item& it = w.rep.item(i);
    encode_batch_reply_item(reply, it.slot, it.cache_len, it.step_tokens, it.results);
  }
}

// One request's buffers on a worker, sized at its BEGIN for steps of up to `rows` input rows (rank 0's
// reserve_step), so the step that first grows the plan allocates nothing: the replica's step, the part, its
// results and reply, the commit's path, and the next messages. The sequence is sized for the model's whole context once.
struct OneRequest {
  std::vector<int32_t> seq, msg, path, local_p, results, reply;
  PlanPart part;
  void reserve(LocalExecutor& local, int rows, int parts_per_msg) {
    const size_t most = static_cast<size_t>(std::max(local.model().config().max_positions, 0)) + 1;
    seq.reserve(most);
    if (rows <= 0) return;
    const size_t n = static_cast<size_t>(rows);
    local.reserve_step(rows);
    part.plan.reserve(rows);
    part.global.reserve(n);
    results.reserve(n);
    reply.reserve(protocol::kReplyHead + n);
    path.reserve(n);
    local_p.reserve(n);
    msg.reserve(protocol::run_message_words(rows, parts_per_msg));
  }
};

}  // namespace

void run_worker(Comm& comm, LocalExecutor& local, const CommGroupOptions& opt) {
  using namespace protocol;
  const int me = comm.rank();
  LA_CHECK(me != 0, "run_worker runs on ranks > 0; rank 0 drives the executor");
  OneRequest one;  // its message and reply buffers also carry the BATCH messages and their replies
  const std::vector<std::vector<int32_t>> none;  // a worker's side of a scatter ...
  std::vector<std::vector<int32_t>> none_gathered;  // ... and of a gather
  std::unique_ptr<WorkerSlots> slots;  // batched steps (made at the first BATCH)
  int32_t expect_no = 0;
  bool have_part = false;
  const bool per_rank = comm.backend() != "nccl";
  for (;;) {
    if (per_rank) comm.scatter(none, one.msg, 0);
    else comm.bcast(one.msg, 0);
    Reader rd(one.msg);
    const int32_t no = expect_no++;
    switch (decode_header(rd, no)) {
      case kBegin: {
        int rows = 0;
        const SampleParams sp = decode_begin(rd, one.seq, rows);
        one.reserve(local, rows, per_rank ? 1 : comm.size() - 1);
        local.begin(one.seq, sp);
        have_part = false;
        break;
      }
      case kRun: {
        if (decode_commit(rd, one.seq, one.path)) {
          LA_CHECK(have_part, "protocol error: commit without a run");
          local_path(one.part.global, one.path, one.local_p);
          local.commit(one.seq, one.local_p);
        }
        decode_part(rd, one.seq, me, comm.size(), one.part);
        ReplyHead h;
        h.no = no;
        h.cache_len = local.model().cache_len();
        const auto tf = Clock::now();
        local.run(one.seq, one.part.plan, one.results);
        const double f = seconds_since(tf);
        h.step_tokens = local.last_step_tokens();
        h.forward_us = static_cast<int32_t>(std::min(f * 1e6, 2.0e9));
        h.stop_signal = opt.stop_signal ? opt.stop_signal->load(std::memory_order_relaxed) : 0;
        encode_reply(one.reply, h, one.results);
        comm.gather(one.reply, none_gathered, 0);
        have_part = true;
        break;
      }
      case kEnd:
        local.end();
        have_part = false;
        break;
      case kBatch: {
        if (!slots) slots = std::make_unique<WorkerSlots>(local.model());
        const int32_t stop = opt.stop_signal ? opt.stop_signal->load(std::memory_order_relaxed) : 0;
        serve_batch(rd, *slots, me, comm.size(), no, stop, one.reply);
        comm.gather(one.reply, none_gathered, 0);
        one.msg.reserve(slots->bound.message_words(comm.size() - 1));  // for the next rounds (after the reader's use)
        one.reply.reserve(slots->bound.reply_words());
        break;
      }
      case kShutdown:
        return;
    }
  }
}

}  // namespace la
