// DistExecutor (rank 0), run_worker (ranks > 0), the startup agreement check and the failure guard. The protocol
// is described in dist_executor.h.
#include "lookahead/parallel/dist_executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "lookahead/parallel/wire.h"
#include "lookahead/util/error.h"

namespace la {
namespace {

using namespace wire;  // the message constants and decoding (wire.h)

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void put_u64(std::vector<int32_t>& m, uint64_t x) {
  m.push_back(static_cast<int32_t>(x & 0xffffffffu));
  m.push_back(static_cast<int32_t>(x >> 32));
}

}  // namespace

// ------------------------------------------------------------------------------------------------ rank 0

DistExecutor::DistExecutor(Comm& comm, LocalExecutor& local, DistOptions opt)
    : comm_(comm), local_(local), opt_(opt), k_(comm.size()), per_rank_(comm.backend() != "nccl"),
      cache_len_(comm.size(), 0) {
  LA_CHECK(comm.rank() == 0, "DistExecutor runs on rank 0 (this is rank ", comm.rank(), "); other ranks call run_worker");
  counters_.ranks = k_;
  counters_.backend = comm.backend();
}

DistExecutor::~DistExecutor() {
  if (!shut_ && std::uncaught_exceptions() == 0) {
    try {
      shutdown();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[rank 0] error: shutting the workers down: %s\n", e.what());
    }
  }
}

std::vector<int32_t> DistExecutor::header(int cmd) {
  LA_CHECK(!shut_, "DistExecutor: ", cmd_name(cmd), " after shutdown");
  return {kMagic, cmd, msg_no_++};
}

void DistExecutor::sync_seq(const std::vector<int32_t>& seq, std::vector<int32_t>& msg) {
  const size_t keep = std::mismatch(sent_seq_.begin(), sent_seq_.end(), seq.begin(), seq.end()).first -
                      sent_seq_.begin();
  msg.push_back(static_cast<int32_t>(keep));
  msg.push_back(static_cast<int32_t>(seq.size() - keep));
  msg.insert(msg.end(), seq.begin() + keep, seq.end());
  sent_seq_ = seq;
}

void DistExecutor::send_command(std::vector<int32_t>& msg) {
  if (k_ == 1) return;
  if (per_rank_) comm_.scatter(std::vector<std::vector<int32_t>>(k_, msg), opt_.rank_timeout_s);
  else comm_.bcast(msg, opt_.rank_timeout_s);
}

void DistExecutor::begin(const std::vector<int32_t>& prompt, const SampleParams& sp) {
  LA_CHECK(!prompt.empty(), "empty prompt (no tokens, not even BOS)");
  auto msg = header(kBegin);
  sent_seq_.clear();
  sync_seq(prompt, msg);
  msg.push_back(float_bits(sp.temperature));
  msg.push_back(sp.top_k);
  msg.push_back(float_bits(sp.top_p));
  put_u64(msg, sp.seed);
  put_u64(msg, sp.stream);
  send_command(msg);
  local_.begin(prompt, sp);
  std::fill(cache_len_.begin(), cache_len_.end(), static_cast<int>(prompt.size()) - 1);
  have_commit_ = false;
  parts_.clear();
  in_request_ = true;
  ++counters_.requests;
}

void DistExecutor::run(const std::vector<int32_t>& seq, const StepPlan& plan, std::vector<int32_t>& results) {
  const auto t0 = Clock::now();
  LA_CHECK(in_request_, "DistExecutor: run outside begin/end");
  LA_CHECK(!seq.empty() && !plan.tokens.empty() && plan.tokens[0] == seq.back(),
           "executor: plan root is not the last token");
  DistStepRecord rec;
  rec.plan_nodes = plan.size();
  const int S = static_cast<int>(seq.size());

  // Partition, counting what each rank must re-feed.
  std::vector<int> base(k_);
  for (int r = 0; r < k_; ++r) base[r] = std::max(0, S - 1 - cache_len_[r]);
  parts_ = partition_plan(plan, k_, base);
  run_seq_size_ = S;

  if (k_ == 1) {
    const auto tf = Clock::now();
    local_.run(seq, plan, results);
    rec.forward_ms = {static_cast<float>(since(tf) * 1e3)};
    rec.part_nodes = {plan.size()};
    rec.step_tokens = {local_.last_step_tokens()};
  } else {
    auto msg = header(kRun);
    if (have_commit_) {
      msg.push_back(1);
      sync_seq(commit_seq_, msg);
      msg.push_back(static_cast<int32_t>(commit_path_.size()));
      msg.insert(msg.end(), commit_path_.begin(), commit_path_.end());
    } else {
      msg.push_back(0);
    }
    have_commit_ = false;
    sync_seq(seq, msg);
    msg.push_back(k_);
    auto put_part = [&](std::vector<int32_t>& m, int r) {
      const auto& p = parts_[r];
      m.push_back(r);
      m.push_back(p.plan.size());
      m.insert(m.end(), p.plan.tokens.begin(), p.plan.tokens.end());
      m.insert(m.end(), p.plan.parents.begin(), p.plan.parents.end());
      for (uint8_t v : p.plan.verify) m.push_back(v);
      m.insert(m.end(), p.global.begin(), p.global.end());
    };
    if (per_rank_) {
      // Each worker gets the common head and its own part only.
      per_rank_msgs_.assign(k_, {});
      for (int r = 1; r < k_; ++r) {
        per_rank_msgs_[r].reserve(msg.size() + 3 + 4 * parts_[r].plan.size());
        per_rank_msgs_[r].assign(msg.begin(), msg.end());
        per_rank_msgs_[r].push_back(1);
        put_part(per_rank_msgs_[r], r);
      }
    } else {
      msg.push_back(k_ - 1);
      for (int r = 1; r < k_; ++r) put_part(msg, r);
    }
    rec.partition_ms = static_cast<float>(since(t0) * 1e3);

    const auto tb = Clock::now();
    if (per_rank_) comm_.scatter(per_rank_msgs_, opt_.rank_timeout_s);
    else comm_.bcast(msg, opt_.rank_timeout_s);
    rec.broadcast_ms = static_cast<float>(since(tb) * 1e3);

    const auto tf = Clock::now();
    std::vector<int32_t> own;
    local_.run(seq, parts_[0].plan, own);
    const double f0 = since(tf);
    const auto tg = Clock::now();
    auto replies = comm_.gather({}, opt_.rank_timeout_s);
    rec.gather_wait_ms = static_cast<float>(since(tg) * 1e3);

    std::vector<std::vector<int32_t>> per(k_);
    per[0] = std::move(own);
    rec.forward_ms.assign(k_, 0.f);
    rec.step_tokens.assign(k_, 0);
    rec.part_nodes.assign(k_, 0);
    rec.forward_ms[0] = static_cast<float>(f0 * 1e3);
    rec.step_tokens[0] = local_.last_step_tokens();
    for (int r = 0; r < k_; ++r) rec.part_nodes[r] = parts_[r].plan.size();
    for (int r = 1; r < k_; ++r) {
      const auto& rep = replies[r];
      check_reply(rep, r, parts_[r].plan.size(), msg_no_ - 1);
      if (rep[1] != cache_len_[r]) {
        ++counters_.cache_mispredictions;
        cache_len_[r] = rep[1];
      }
      rec.step_tokens[r] = rep[2];
      rec.forward_ms[r] = static_cast<float>(rep[3] * 1e-3);
      if (rep[4] != 0 && opt_.on_worker_stop) opt_.on_worker_stop(rep[4], r);
      per[r].assign(rep.begin() + kReplyHead, rep.end());
    }
    int dis = 0;
    results = merge_part_results(plan.size(), parts_, per, &dis);
    counters_.disagreements += dis;
  }
  cache_len_[0] = local_.model().cache_len();
  rec.wall_ms = static_cast<float>(since(t0) * 1e3);

  ++counters_.steps;
  counters_.plan_nodes += plan.size();
  double mx = 0;
  for (int r = 0; r < k_; ++r) {
    counters_.part_nodes += rec.part_nodes[r];
    counters_.step_tokens += rec.step_tokens[r];
    mx = std::max(mx, static_cast<double>(rec.forward_ms[r]) * 1e-3);
  }
  counters_.max_forward_seconds += mx;
  if (cost_ && k_ > 1) {  // rank 0's own forward already fed the cost model (LocalExecutor)
    cost_->observe_parts(plan.size(), *std::max_element(rec.step_tokens.begin(), rec.step_tokens.end()));
    cost_->observe_latency(std::max(0.0, rec.wall_ms * 1e-3 - mx));
  }
  counters_.forward_seconds_rank0 += rec.forward_ms[0] * 1e-3;
  counters_.partition_seconds += rec.partition_ms * 1e-3;
  counters_.broadcast_seconds += rec.broadcast_ms * 1e-3;
  counters_.gather_wait_seconds += rec.gather_wait_ms * 1e-3;
  counters_.run_seconds += rec.wall_ms * 1e-3;
  if (opt_.record_steps) records_.push_back(std::move(rec));
}

void DistExecutor::commit(const std::vector<int32_t>& seq, const std::vector<int32_t>& path) {
  LA_CHECK(in_request_ && !parts_.empty(), "DistExecutor: commit without a run");
  local_.commit(seq, local_path(parts_[0], path));
  const int target = static_cast<int>(seq.size()) - 1;
  for (int r = 0; r < k_; ++r) {
    const int lp = static_cast<int>(local_path(parts_[r], path).size());
    cache_len_[r] = std::min(target, run_seq_size_ + std::max(lp, 1) - 1);
  }
  cache_len_[0] = local_.model().cache_len();
  if (k_ > 1) {
    commit_seq_ = seq;
    commit_path_ = path;
    have_commit_ = true;
  }
}

void DistExecutor::end() {
  if (!in_request_) return;
  auto msg = header(kEnd);
  send_command(msg);
  local_.end();
  have_commit_ = false;
  in_request_ = false;
}

void DistExecutor::shutdown() {
  if (shut_) return;
  auto msg = header(kShutdown);
  send_command(msg);
  shut_ = true;
}

DistCounters DistExecutor::counters() const {
  DistCounters c = counters_;
  c.bytes_sent = comm_.stats().bytes_sent;
  c.bytes_received = comm_.stats().bytes_received;
  return c;
}

// ------------------------------------------------------------------------------------------------ workers

void run_worker(Comm& comm, LocalExecutor& local, const DistOptions& opt) {
  // Workers wait for rank 0 without a limit (rank 0 may idle between requests). A signal delivered to a worker
  // only sets opt.stop_signal: the worker keeps serving and reports it in its next RUN reply, so rank 0 stops
  // the job cleanly (saves state, sends SHUTDOWN) instead of a worker's exit aborting it.
  const int me = comm.rank();
  LA_CHECK(me != 0, "run_worker runs on ranks > 0; rank 0 drives a DistExecutor");
  std::vector<int32_t> seq, msg, part_global, path;
  int32_t expect_no = 0;
  bool have_part = false;
  const bool per_rank = comm.backend() != "nccl";
  for (;;) {
    if (per_rank) msg = comm.scatter({}, 0);
    else comm.bcast(msg, 0);
    Reader rd(msg);
    const int32_t no = expect_no;
    const int32_t cmd = read_header(rd, expect_no);
    ++expect_no;
    switch (cmd) {
      case kBegin: {
        const SampleParams sp = read_begin(rd, seq);
        local.begin(seq, sp);
        have_part = false;
        break;
      }
      case kRun: {
        if (read_commit(rd, seq, path)) {
          LA_CHECK(have_part, "protocol error: commit without a run");
          local.commit(seq, local_path(part_global, path));
        }
        PlanPart part = read_part(rd, seq, me, comm.size());
        const int cache_before = local.model().cache_len();
        const auto tf = Clock::now();
        std::vector<int32_t> res;
        local.run(seq, part.plan, res);
        const double f = since(tf);
        std::vector<int32_t> reply;
        reply.reserve(kReplyHead + res.size());
        reply.push_back(no);
        reply.push_back(cache_before);
        reply.push_back(local.last_step_tokens());
        reply.push_back(static_cast<int32_t>(std::min(f * 1e6, 2.0e9)));
        reply.push_back(opt.stop_signal ? opt.stop_signal->load(std::memory_order_relaxed) : 0);
        reply.insert(reply.end(), res.begin(), res.end());
        comm.gather(reply, 0);
        part_global = std::move(part.global);
        have_part = true;
        break;
      }
      case kEnd:
        local.end();
        have_part = false;
        break;
      case kShutdown:
        return;
      default:
        fail("protocol error: unknown command ", cmd, " from rank 0");
    }
  }
}

// ------------------------------------------------------------------------------------------------ startup check

void check_agreement(Comm& comm, uint64_t model_checksum, const std::string& params) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : params) h = (h ^ c) * 1099511628211ull;
  const auto models = comm.allgather(model_checksum);
  const auto ps = comm.allgather(h);
  std::string bad_model, bad_params;
  for (int r = 1; r < comm.size(); ++r) {
    if (models[r] != models[0]) bad_model += (bad_model.empty() ? "" : ", ") + std::to_string(r);
    if (ps[r] != ps[0]) bad_params += (bad_params.empty() ? "" : ", ") + std::to_string(r);
  }
  if (bad_model.empty() && bad_params.empty()) return;
  std::string msg = "ranks disagree with rank 0:";
  if (!bad_model.empty()) msg += " model weights (checksum) differ on rank(s) " + bad_model + ";";
  if (!bad_params.empty()) msg += " parameters differ on rank(s) " + bad_params + ";";
  msg += " every rank must load the same model with the same options";
  // Rank 0 reports (and its abort ends the job); the others wait a little so the job ends with one clear message,
  // then fail on their own should rank 0 not abort.
  if (comm.rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(10));
  throw Error(msg);
}

// ------------------------------------------------------------------------------------------------ guard

int dist_main_guard(const std::function<int()>& body, const std::string& program,
                    const std::vector<int>& clean_codes) {
  auto world = [] {
    const int m = mpi_world_size();
    return m > 0 ? m : launcher_size();
  };
  auto rank = [] {
    const int r = mpi_world_rank();
    return r >= 0 ? r : launcher_rank();
  };
  int rc = 1;
  std::string err;
  try {
    if (launcher_size() > 1) mpi_init();
    rc = body();
  } catch (const std::exception& e) {
    err = e.what();
    if (err.empty()) err = "unknown error";
  } catch (...) {
    err = "unknown exception";
  }
  std::fflush(stdout);
  const bool multi = world() > 1;
  if (!err.empty()) {
    if (multi) std::fprintf(stderr, "[rank %d] error: %s\n", rank(), err.c_str());
    else std::fprintf(stderr, "%s%serror: %s\n", program.c_str(), program.empty() ? "" : ": ", err.c_str());
    std::fflush(stderr);
    if (multi) mpi_abort(1);
    mpi_finalize();
    return 1;
  }
  const bool clean = std::find(clean_codes.begin(), clean_codes.end(), rc) != clean_codes.end();
  if (rc != 0 && multi && !clean) {
    std::fprintf(stderr, "[rank %d] exiting with status %d; ending the job\n", rank(), rc);
    std::fflush(stderr);
    mpi_abort(rc);
  }
  mpi_finalize();
  return rc;
}

}  // namespace la
