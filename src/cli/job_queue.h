// Where a group's owner gets its requests and puts its records (--lp-size: the job's ranks as groups).
//
// The request loops (request_loop.h, batch_loop.h) ask a RequestSource for the next prompt index and hand it each
// finished record; they know nothing of ranks. Two sources:
//   QueueServer  world rank 0. It owns the queue (the prompt indices --resume did not find in --output, in input
//                order) and is the one writer of --output. Its own group's loop takes indices straight from the
//                queue; other groups' owners ask for them with messages, which rank 0 answers between its own
//                steps (poll(): MPI_Iprobe, never blocking a step). With one group there are no messages at all:
//                it is the plain loop over the prompts.
//   QueueClient  the owner (first rank) of every other group: asks rank 0 for an index when it has room for a
//                request, sends each finished record (JSON text) to rank 0, says when it is done.
//
// Protocol (point-to-point on the job's communicator, int32 messages, tags below the communicator's own):
//   owner -> rank 0: WANT | DONE(record text) | BEAT | STOPPED(signal) | BYE(interrupted, dropped, refused)
//   rank 0 -> owner: ASSIGN(index) | NOMORE | STOP(signal) | SHARE(prompt length, tokens) | RELEASE
// Drafts learned across groups (--share-drafts on): rank 0 hands every finished request's tokens (prompt + output,
// from its own records and the DONE records it receives) to its own strategy and, as SHARE, to every other owner
// still running; each adds the output to its global draft state (Strategy::learn: the trie, the suffix tree)
// between its steps. Records and SHAREs are posted (Comm::post): neither side waits for the other to take them.
// An owner has at most one WANT outstanding; rank 0 answers each WANT with ASSIGN or NOMORE (no index left, or the
// job is stopping). Messages between two ranks arrive in order, so a record always reaches rank 0 before the BYE
// that follows it. After its BYE an owner waits for RELEASE, which rank 0 sends once every owner said BYE, so no
// message is left in flight when the ranks finalise.
//
// Stops and failures: a SIGINT/SIGTERM seen by any owner (or forwarded to it by one of its group's ranks) is sent
// to rank 0 (STOPPED), which stops itself and sends STOP to every owner: each group finishes or drops its requests
// in flight within --stop-grace, as one process does, and the job ends with the interrupted status. An owner sends
// BEAT when it has sent nothing for a quarter of --rank-timeout; rank 0 fails the job, naming the rank, when an
// owner has been silent for --rank-timeout (before its first message, which follows its calibration: ten times
// that, at least 120 s). A dead rank is ended by mpirun/srun; a failing owner aborts the job through the guard.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lookahead/decode/step_runner.h"
#include "lookahead/dist/comm.h"
#include "lookahead/util/clock.h"
#include "output_file.h"

namespace la::cli {

struct LoopResult;

class RequestSource {
 public:
  static constexpr int64_t kNone = -1;   // no more requests for this owner: the queue is empty, or a stop came
  static constexpr int64_t kLater = -2;  // none yet (rank 0's answer is on its way): ask again after a step
  virtual ~RequestSource() = default;
  // The next prompt index. With `wait`, blocks until there is one or there will be none (never kLater).
  virtual int64_t next(bool wait) = 0;
  // A finished request's --output record (written by world rank 0, in finishing order).
  virtual void finished(const nlohmann::json& record) = 0;
  // Between steps, never blocking: rank 0 answers other owners; an owner sends its heartbeat and learns of a stop.
  virtual void poll() = 0;
  // Every prompt has been handed out (so a stop now cut nothing short).
  virtual bool drained() const = 0;
  // Rank 0: called with every record another owner sent (the loop's progress lines); the loop clears it.
  std::function<void(const nlohmann::json&)> on_remote;
  // Another group's finished request (prompt + output, and the prompt's length), between steps; null: no sharing.
  // Rank 0 calls it for every other group's record even without --share-drafts (then it keeps them for the state
  // file: generate.cpp).
  std::function<void(const std::vector<int32_t>&, size_t)> on_share;
};

struct QueueOptions {
  double rank_timeout_s = 60;   // --rank-timeout (0: no heartbeats, wait forever)
  bool keep_per_prompt = false;  // --stats-json: rank 0 keeps other owners' per-prompt stats too
  std::string tag;               // log prefix
  bool quiet = false;            // rank 0: no "records by group" line at the end
  bool share = false;            // --share-drafts: rank 0 sends every finished request's tokens to the owners
};

class QueueServer final : public RequestSource {
 public:
  // `world`: the job's communicator (null, or `owners` empty: one group); `owners`: the world ranks of the other
  // groups' owners; skip[i]: prompt i is already in --output. `out` (may be closed: no --output) and `skip` must
  // outlive the server.
  QueueServer(Comm* world, std::vector<int> owners, const std::vector<char>& skip, JsonlOutput& out,
              const QueueOptions& opt);
  int64_t next(bool wait) override;
  void finished(const nlohmann::json& record) override;
  void poll() override;
  bool drained() const override;
  // After rank 0's own loop: answers the other owners until each said BYE, releases them, and adds what they did
  // (records, totals, dropped and refused requests) to `loop`. No-op with one group.
  void drain(LoopResult& loop);

 private:
  int64_t take();  // the next index not handed out, or kNone (none left, or a stop)
  void serve();     // answers the other owners' messages, sends STOP once, checks their silence
  void share(const nlohmann::json& record, int from);  // SHARE to every running owner but `from`
  void handle(int from, const std::vector<int32_t>& m);
  void check_silence();
  int owner_index(int world_rank) const;

  Comm* world_;
  std::vector<int> owners_;
  const std::vector<char>& skip_;
  JsonlOutput& out_;
  QueueOptions opt_;
  size_t cursor_ = 0;  // the next prompt index not handed out (skipped ones are passed over)
  bool stop_sent_ = false;
  bool took_this_step_ = false;  // rank 0's own group took a request since the loop's last poll()
  std::vector<char> bye_;
  std::vector<char> heard_;
  std::vector<Clock::time_point> last_;  // when rank 0 last had a message from owner i
  Clock::time_point start_;
  std::vector<int32_t> msg_;
  // What the other owners did (added to the loop's result by drain).
  RequestStats remote_total_;
  size_t remote_ran_ = 0, remote_refused_ = 0;
  size_t own_ran_ = 0;
  std::vector<size_t> ran_by_;  // records each other owner sent
  bool remote_dropped_ = false;
  nlohmann::json remote_per_prompt_ = nlohmann::json::array();
};

class QueueClient final : public RequestSource {
 public:
  // `world` must outlive the client; this rank is a group owner other than world rank 0.
  QueueClient(Comm& world, const QueueOptions& opt);
  int64_t next(bool wait) override;
  void finished(const nlohmann::json& record) override;
  void poll() override;
  bool drained() const override { return no_more_; }
  // After the owner's loop: BYE with the loop's outcome, then waits for rank 0's RELEASE.
  void finish(const LoopResult& loop);

 private:
  void send(const std::vector<int32_t>& m);
  void read_messages();

  Comm& world_;
  QueueOptions opt_;
  double beat_s_;
  Clock::time_point last_sent_;
  bool want_out_ = false, no_more_ = false, released_ = false, stop_told_ = false;
  int64_t assigned_ = -1;
  std::vector<int32_t> msg_;
};

}  // namespace la::cli
