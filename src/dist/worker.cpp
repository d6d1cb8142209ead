// The worker loop (worker.h): decode rank 0's command, apply it to this rank's replica, reply to RUN.
#include "lookahead/dist/worker.h"

#include <algorithm>
#include <chrono>

#include "lookahead/parallel/protocol.h"
#include "lookahead/util/clock.h"
#include "lookahead/util/error.h"

namespace la {

void run_worker(Comm& comm, LocalExecutor& local, const CommGroupOptions& opt) {
  using namespace protocol;
  const int me = comm.rank();
  LA_CHECK(me != 0, "run_worker runs on ranks > 0; rank 0 drives the executor");
  std::vector<int32_t> seq, msg, path, local_p, results, reply;
  PlanPart part;
  int32_t expect_no = 0;
  bool have_part = false;
  const bool per_rank = comm.backend() != "nccl";
  for (;;) {
    if (per_rank) msg = comm.scatter({}, 0);
    else comm.bcast(msg, 0);
    Reader rd(msg);
    const int32_t no = expect_no++;
    switch (decode_header(rd, no)) {
      case kBegin: {
        const SampleParams sp = decode_begin(rd, seq);
        local.begin(seq, sp);
        have_part = false;
        break;
      }
      case kRun: {
        if (decode_commit(rd, seq, path)) {
          LA_CHECK(have_part, "protocol error: commit without a run");
          local_path(part.global, path, local_p);
          local.commit(seq, local_p);
        }
        decode_part(rd, seq, me, comm.size(), part);
        ReplyHead h;
        h.no = no;
        h.cache_len = local.model().cache_len();
        const auto tf = Clock::now();
        local.run(seq, part.plan, results);
        const double f = seconds_since(tf);
        h.step_tokens = local.last_step_tokens();
        h.forward_us = static_cast<int32_t>(std::min(f * 1e6, 2.0e9));
        h.stop_signal = opt.stop_signal ? opt.stop_signal->load(std::memory_order_relaxed) : 0;
        encode_reply(reply, h, results);
        comm.gather(reply, 0);
        have_part = true;
        break;
      }
      case kEnd:
        local.end();
        have_part = false;
        break;
      case kShutdown:
        return;
    }
  }
}

}  // namespace la
