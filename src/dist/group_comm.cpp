// The comm group (replica_group.h): replica r is rank r of an MPI job. Rank 0 runs replica 0 here; the workers
// (worker.cpp) decode the messages built here (protocol.h). The commit of step t travels with the RUN of step t+1
// (one message out and one reply per worker and step); rank 0 commits its own replica at once. Batched steps the
// same way: a slot's begin, commit and end are queued as BATCH ops and go out in front of the next round's chunks
// and parts (one BATCH message out and one reply per worker and round); rank 0's own slots apply them at once.
#include <algorithm>
#include <chrono>

#include "lookahead/dist/comm_group.h"
#include "lookahead/parallel/protocol.h"
#include "lookahead/util/clock.h"
#include "lookahead/util/error.h"

namespace la {
namespace {


class CommGroup : public ReplicaGroup {
 public:
  CommGroup(Comm& comm, LocalExecutor& local, const CommGroupOptions& opt)
      : comm_(comm), local_(local), opt_(opt), k_(comm.size()), per_rank_(comm.backend() != "nccl") {
    LA_CHECK(comm.rank() == 0, "the executor runs on rank 0 (this is rank ", comm.rank(),
             "); other ranks call run_worker");
    if (per_rank_) per_rank_msgs_.resize(k_);
  }

  int size() const override { return k_; }
  std::string backend() const override { return comm_.backend(); }

  void begin(const std::vector<int32_t>& prompt, const SampleParams& sp) override {
    protocol::encode_begin(msg_, next_no(protocol::kBegin), step_rows_, sync_, prompt, sp);
    send_all();
    local_.begin(prompt, sp);
    have_commit_ = false;
  }

  void run(const std::vector<int32_t>& seq, const std::vector<PlanPart>& parts,
           std::vector<PartReply>& replies) override {
    LA_CHECK(static_cast<int>(parts.size()) == k_, "comm group: ", parts.size(), " parts for ", k_, " ranks");
    replies.resize(k_);
    times_ = {};
    const int32_t no = next_no(protocol::kRun);
    protocol::encode_run_head(msg_, no, sync_, have_commit_ ? &commit_seq_ : nullptr, commit_path_, seq, k_);
    have_commit_ = false;
    if (per_rank_) {  // each worker gets the common head and its own part only
      for (int r = 1; r < k_; ++r) {
        auto& m = per_rank_msgs_[r];
        m.assign(msg_.begin(), msg_.end());
        protocol::encode_parts_count(m, 1);
        protocol::encode_part(m, r, parts[r]);
      }
    } else {  // one broadcast with every worker's part
      protocol::encode_parts_count(msg_, k_ - 1);
      for (int r = 1; r < k_; ++r) protocol::encode_part(msg_, r, parts[r]);
    }
    const auto tb = Clock::now();
    if (per_rank_) comm_.scatter(per_rank_msgs_, none_, opt_.rank_timeout_s);
    else comm_.bcast(msg_, opt_.rank_timeout_s);
    times_.send_s = seconds_since(tb);

    PartReply& own = replies[0];
    own.cache_len = local_.model().cache_len();
    const auto tf = Clock::now();
    local_.run(seq, parts[0].plan, own.results);
    own.forward_s = seconds_since(tf);
    own.step_tokens = local_.last_step_tokens();
    own.stop_signal = 0;

    const auto tg = Clock::now();
    comm_.gather(none_, gathered_, opt_.rank_timeout_s);
    times_.gather_wait_s = seconds_since(tg);
    protocol::ReplyHead h;
    for (int r = 1; r < k_; ++r) {
      PartReply& rep = replies[r];
      protocol::decode_reply(gathered_[r], r, parts[r].plan.size(), no, h, rep.results);
      rep.cache_len = h.cache_len;
      rep.step_tokens = h.step_tokens;
      rep.forward_s = h.forward_us * 1e-6;
      rep.stop_signal = h.stop_signal;
    }
  }

  void commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path,
              const std::vector<PlanPart>& parts) override {
    local_path(parts[0].global, path, path_);
    local_.commit(seq, path_);
    if (k_ > 1) {
      commit_seq_ = seq;
      commit_path_ = path;
      have_commit_ = true;
    }
  }

  void end() override {
    protocol::encode_header(msg_, protocol::kEnd, next_no(protocol::kEnd));
    send_all();
    local_.end();
    have_commit_ = false;
  }

  // ---- Batched steps.
  void slot_begin(int slot, const std::vector<int32_t>& prompt, const SampleParams& sp, int rows) override {
    if (!own_slots_) own_slots_ = std::make_unique<SlotReplica>(local_.model());
    own_slots_->begin(slot, prompt, sp, rows);
    if (static_cast<int>(slot_sync_.size()) <= slot) slot_sync_.resize(slot + 1);
    slot_sync_[slot].sent.reserve(static_cast<size_t>(std::max(rows, 0)) + 1);
    // The slots' messages and replies sized for every slot begun so far at its largest (no step grows them).
    batch_bound_.begin(slot, rows);
    const size_t words = batch_bound_.message_words(k_ - 1);
    msg_.reserve(words);
    ops_.reserve(words);
    for (auto& m : per_rank_msgs_) m.reserve(words);
    gathered_.resize(k_);
    for (auto& g : gathered_) g.reserve(batch_bound_.reply_words());
    protocol::encode_slot_begin(ops_, slot, rows, slot_sync_[slot], prompt, sp);
    ++queued_;
  }

  void slot_commit(int slot, const std::vector<int32_t>& seq, const std::vector<int32_t>& path,
                   const std::vector<PlanPart>& parts) override {
    local_path(parts[0].global, path, path_);
    own_slots_->commit(slot, seq, path_);
    protocol::encode_slot_commit(ops_, slot, slot_sync_[slot], seq, path);
    ++queued_;
  }

  void slot_end(int slot) override {
    own_slots_->end(slot);
    protocol::encode_slot_end(ops_, slot);
    ++queued_;
  }

  void run_slots(const std::vector<SlotWork>& work, std::vector<PartReply>& replies) override {
    LA_CHECK(own_slots_ != nullptr, "comm group: a batched step before any slot began");
    if (replies.size() < work.size() * k_) replies.resize(work.size() * k_);
    times_ = {};
    const int32_t no = next_no(protocol::kBatch);
    protocol::encode_batch_head(msg_, no, queued_ + static_cast<int>(work.size()));
    msg_.insert(msg_.end(), ops_.begin(), ops_.end());
    ops_.clear();
    queued_ = 0;
    for (const SlotWork& w : work) {
      if (w.chunk > 0) {
        protocol::encode_slot_chunk(msg_, w.slot, w.chunk);
        continue;
      }
      protocol::encode_slot_parts(msg_, w.slot, slot_sync_[w.slot], *w.seq, k_, k_ - 1);
      for (int r = 1; r < k_; ++r) protocol::encode_part(msg_, r, (*w.parts)[r]);
    }
    const auto tb = Clock::now();
    send_all();  // every worker gets every part: a batch's parts are small next to the forward
    times_.send_s = seconds_since(tb);

    SlotReplica& own = *own_slots_;
    own.clear();
    for (const SlotWork& w : work) {
      if (w.chunk > 0) own.stage_chunk(w.slot, *w.seq, w.chunk);
      else own.stage_part(w.slot, *w.seq, (*w.parts)[0].plan);
    }
    const double f = own.forward();
    for (size_t i = 0; i < work.size(); ++i) {
      SlotReplica::Item& it = own.item(static_cast<int>(i));
      PartReply& rep = replies[i * k_];
      rep.cache_len = it.cache_len;
      rep.step_tokens = it.step_tokens;
      rep.forward_s = f;
      rep.stop_signal = 0;
      rep.results.swap(it.results);
    }

    const auto tg = Clock::now();
    comm_.gather(none_, gathered_, opt_.rank_timeout_s);
    times_.gather_wait_s = seconds_since(tg);
    for (int r = 1; r < k_; ++r) {
      protocol::Reader rd(gathered_[r]);
      int32_t stop = 0, us = 0;
      protocol::decode_batch_reply_head(rd, r, no, static_cast<int>(work.size()), stop, us);
      protocol::BatchItemReply h;
      for (size_t i = 0; i < work.size(); ++i) {
        const SlotWork& w = work[i];
        PartReply& rep = replies[i * k_ + r];
        protocol::decode_batch_reply_item(rd, r, w.slot, w.chunk > 0 ? 0 : (*w.parts)[r].plan.size(), h,
                                          rep.results);
        rep.cache_len = h.cache_len;
        rep.step_tokens = h.step_tokens;
        rep.forward_s = us * 1e-6;
        rep.stop_signal = stop;
      }
      LA_CHECK(rd.done(), "protocol error: rank ", r, " replied trailing words after its items");
    }
  }

  // One request's steps of up to `rows` input rows per replica: rank 0's buffers here (the message, each worker's
  // reply, the commit it carries), and the workers' through the next BEGIN (its step rows).
  void reserve_step(int rows) override {
    step_rows_ = std::clamp(std::max(step_rows_, rows), 0, protocol::kMaxStepRows);
    const size_t n = static_cast<size_t>(step_rows_);
    const size_t run_words = protocol::run_message_words(step_rows_, per_rank_ ? 1 : k_ - 1);
    msg_.reserve(run_words);
    for (auto& m : per_rank_msgs_) m.reserve(run_words);
    gathered_.resize(k_);
    for (auto& g : gathered_) g.reserve(protocol::kReplyHead + n);
    commit_path_.reserve(n);
    path_.reserve(n);
    // The sequences grow with the request: sized for the model's whole context once (a step appends at most a
    // step's tokens to a sequence that never outgrows it).
    const size_t most = static_cast<size_t>(std::max(local_.model().config().max_positions, 0)) + 1;
    commit_seq_.reserve(most);
    sync_.sent.reserve(most);
    local_.reserve_step(rows);
  }

  void shutdown() override {
    if (shut_) return;
    protocol::encode_header(msg_, protocol::kShutdown, next_no(protocol::kShutdown));
    send_all();
    shut_ = true;
  }

  GroupTimes last_times() const override { return times_; }
  uint64_t bytes_sent() const override { return comm_.stats().bytes_sent; }
  uint64_t bytes_received() const override { return comm_.stats().bytes_received; }

 private:
  int32_t next_no(protocol::Cmd cmd) {
    LA_CHECK(!shut_, "comm group: ", protocol::cmd_name(cmd), " after shutdown");
    return msg_no_++;
  }
  // A command every worker gets whole (BEGIN, END, SHUTDOWN).
  void send_all() {
    if (k_ == 1) return;
    if (per_rank_) {
      for (int r = 1; r < k_; ++r) per_rank_msgs_[r].assign(msg_.begin(), msg_.end());
      comm_.scatter(per_rank_msgs_, none_, opt_.rank_timeout_s);
    } else {
      comm_.bcast(msg_, opt_.rank_timeout_s);
    }
  }

  Comm& comm_;
  LocalExecutor& local_;
  CommGroupOptions opt_;
  int k_;
  bool per_rank_;  // MPI: every worker gets its own message; NCCL: one broadcast with every part
  std::vector<int32_t> msg_;
  std::vector<std::vector<int32_t>> per_rank_msgs_;
  std::vector<std::vector<int32_t>> gathered_;  // the workers' replies (buffers reused)
  std::vector<int32_t> none_;                   // what rank 0 itself gives a gather and takes from a scatter
  int step_rows_ = 0;                           // reserve_step(): sent to the workers with every BEGIN
  protocol::SeqSync sync_;
  int32_t msg_no_ = 0;
  bool shut_ = false;
  bool have_commit_ = false;  // a commit waiting to go out with the next RUN
  std::vector<int32_t> commit_seq_, commit_path_, path_;
  std::unique_ptr<SlotReplica> own_slots_;    // batched steps: rank 0's slots
  std::vector<protocol::SeqSync> slot_sync_;  // per slot: the sequence the workers hold
  protocol::BatchBound batch_bound_;          // what the slots' messages and replies can need
  std::vector<int32_t> ops_;                  // BATCH ops waiting for the next round ...
  int queued_ = 0;                            // ... and their number
  GroupTimes times_;
};

}  // namespace

std::unique_ptr<ReplicaGroup> make_comm_group(Comm& comm, LocalExecutor& local, const CommGroupOptions& opt) {
  return std::make_unique<CommGroup>(comm, local, opt);
}

}  // namespace la
