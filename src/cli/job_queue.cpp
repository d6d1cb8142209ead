// The request queue of a job over groups (job_queue.h): rank 0's server, the other owners' client, their messages.
#include "job_queue.h"

#include <cmath>
#include <cstring>
#include <iostream>
#include <thread>

#include "lookahead/util/error.h"
#include "lookahead/util/json_parse.h"
#include "request_loop.h"
#include "signals.h"

namespace la::cli {
namespace {

constexpr int kToRoot = 29001;    // owner -> rank 0 (the communicators' own tags start at 30000)
constexpr int kFromRoot = 29002;  // rank 0 -> owner

enum : int32_t { kWant = 1, kDone, kBeat, kStopped, kBye };  // to rank 0
enum : int32_t { kAssign = 11, kNoMore, kStop, kRelease, kShare };  // from rank 0

void pack_text(std::vector<int32_t>& m, const std::string& s) {
  const size_t at = m.size();
  m.resize(at + 1 + (s.size() + 3) / 4, 0);
  m[at] = static_cast<int32_t>(s.size());
  std::memcpy(m.data() + at + 1, s.data(), s.size());
}

std::string unpack_text(const std::vector<int32_t>& m, size_t at) {
  LA_CHECK(m.size() > at && m[at] >= 0 && static_cast<size_t>(m[at]) <= (m.size() - at - 1) * 4,
           "request queue: bad record message");
  return std::string(reinterpret_cast<const char*>(m.data() + at + 1), static_cast<size_t>(m[at]));
}

// The totals of a record another owner sent (what the summary and --stats-json add up; its seconds are replaced by
// the job's wall time at the end).
RequestStats stats_of(const nlohmann::json& rec) {
  RequestStats s;
  const nlohmann::json& st = rec.at("stats");
  s.new_tokens = rec.value("new_tokens", 0);
  s.steps = rec.value("steps", 0);
  s.seconds = rec.value("seconds", 0.0);
  s.finish_reason = rec.value("finish_reason", "");
  for (const auto& v : st.value("accept_hist", nlohmann::json::array())) s.accept_hist.push_back(v.get<int64_t>());
  const double steps = s.steps;
  s.draft_tokens = std::llround(st.value("draft_tokens_per_step", 0.0) * steps);
  s.lookahead_tokens = std::llround(st.value("lookahead_tokens_per_step", 0.0) * steps);
  s.step_tokens = std::llround(st.value("step_tokens_per_step", 0.0) * steps);
  s.prefill_s = st.value("prefill_s", 0.0);
  s.draft_s = st.value("draft_s", 0.0);
  s.forward_s = st.value("forward_s", 0.0);
  s.verify_s = st.value("verify_s", 0.0);
  s.commit_s = st.value("commit_s", 0.0);
  s.cpu_s = st.value("cpu_s", 0.0);
  return s;
}

void nap() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }

}  // namespace

// ---- rank 0 ----

QueueServer::QueueServer(Comm* world, std::vector<int> owners, const std::vector<char>& skip, JsonlOutput& out,
                         const QueueOptions& opt)
    : world_(world), owners_(std::move(owners)), skip_(skip), out_(out), opt_(opt) {
  if (!world_) owners_.clear();
  bye_.assign(owners_.size(), 0);
  heard_.assign(owners_.size(), 0);
  start_ = Clock::now();
  last_.assign(owners_.size(), start_);
  ran_by_.assign(owners_.size(), 0);
}

bool QueueServer::drained() const {
  size_t i = cursor_;
  while (i < skip_.size() && skip_[i]) ++i;
  return i >= skip_.size();
}

int64_t QueueServer::next(bool wait) {
  // With other groups, rank 0's own group takes at most one new request per step while it has some in flight, as
  // the other owners do (one WANT round trip per step): every group fills its batch at the pace of its own steps,
  // so a faster group takes more of the queue and a slow one does not sit on a full batch of it.
  if (!wait && !owners_.empty() && took_this_step_) {
    serve();
    return kLater;
  }
  const int64_t i = take();  // rank 0's own group first (a --prompt is then streamed by rank 0), then the others
  if (i >= 0) took_this_step_ = true;
  serve();  // (a stop seen here: the loop treats the request it now starts as one in flight)
  return i;
}

int64_t QueueServer::take() {
  if (stop_signal() != 0) return kNone;
  while (cursor_ < skip_.size() && skip_[cursor_]) ++cursor_;
  if (cursor_ >= skip_.size()) return kNone;
  return static_cast<int64_t>(cursor_++);
}

void QueueServer::finished(const nlohmann::json& record) {
  if (out_.is_open()) out_.write(record);
  ++own_ran_;
  share(record, -1);
}

void QueueServer::share(const nlohmann::json& record, int from) {
  // Without sharing, rank 0 still takes the other groups' requests (on_share set: for the saved state alone).
  if (owners_.empty() || (!opt_.share && (from < 0 || !on_share))) return;
  const auto& prompt = record.at("prompt_ids");
  const auto& ids = record.at("ids");
  std::vector<int32_t> m;
  m.reserve(2 + prompt.size() + ids.size());
  m.push_back(kShare);
  m.push_back(static_cast<int32_t>(prompt.size()));
  for (const auto& t : prompt) m.push_back(t.get<int32_t>());
  for (const auto& t : ids) m.push_back(t.get<int32_t>());
  if (from >= 0 && on_share) on_share(std::vector<int32_t>(m.begin() + 2, m.end()), prompt.size());
  if (!opt_.share) return;
  for (size_t i = 0; i < owners_.size(); ++i)
    if (!bye_[i] && owners_[i] != from) world_->post(owners_[i], kFromRoot, m);
}

int QueueServer::owner_index(int world_rank) const {
  for (size_t i = 0; i < owners_.size(); ++i)
    if (owners_[i] == world_rank) return static_cast<int>(i);
  fail("request queue: a message from rank ", world_rank, ", which owns no group");
}

void QueueServer::poll() {
  took_this_step_ = false;  // the loop calls poll() once per step
  serve();
}

void QueueServer::serve() {
  if (owners_.empty()) return;
  int from = -1;
  while (world_->try_recv(-1, kToRoot, msg_, &from)) handle(from, msg_);
  const int sig = stop_signal();
  if (sig != 0 && !stop_sent_) {  // every group stops: no new requests, the ones in flight within --stop-grace
    stop_sent_ = true;
    for (size_t i = 0; i < owners_.size(); ++i)
      if (!bye_[i]) world_->send(owners_[i], kFromRoot, {kStop, sig});
  }
  check_silence();
}

void QueueServer::handle(int from, const std::vector<int32_t>& m) {
  LA_CHECK(!m.empty(), "request queue: empty message from rank ", from);
  const int i = owner_index(from);
  heard_[i] = 1;
  last_[i] = Clock::now();
  switch (m[0]) {
    case kWant: {
      const int64_t idx = take();  // the same queue rank 0's own group takes from
      if (idx >= 0) world_->send(from, kFromRoot, {kAssign, static_cast<int32_t>(idx)});
      else world_->send(from, kFromRoot, {kNoMore});
      break;
    }
    case kDone: {
      const nlohmann::json rec = parse_json_checked(unpack_text(m, 1), "a record from rank " + std::to_string(from));
      if (out_.is_open()) out_.write(rec);
      remote_total_.add(stats_of(rec));
      ++remote_ran_;
      ++ran_by_[i];
      if (opt_.keep_per_prompt) {
        remote_per_prompt_.push_back(rec["stats"]);
        remote_per_prompt_.back()["id"] = rec["id"];
      }
      if (on_remote) on_remote(rec);
      share(rec, from);
      break;
    }
    case kBeat:
      break;
    case kStopped: {
      LA_CHECK(m.size() == 2, "request queue: bad STOPPED message from rank ", from);
      if (stop_signal() == 0) {
        std::cerr << (opt_.tag + "rank " + std::to_string(from) + " received " + signal_name(m[1]) +
                      ": stopping every group\n");
        request_stop(m[1]);
      }
      break;
    }
    case kBye: {
      LA_CHECK(m.size() == 4, "request queue: bad BYE message from rank ", from);
      bye_[i] = 1;
      remote_dropped_ = remote_dropped_ || m[2] != 0;
      remote_refused_ += static_cast<size_t>(m[3]);
      break;
    }
    default:
      fail("request queue: unknown message ", m[0], " from rank ", from);
  }
}

void QueueServer::check_silence() {
  if (opt_.rank_timeout_s <= 0) return;
  const auto now = Clock::now();
  for (size_t i = 0; i < owners_.size(); ++i) {
    if (bye_[i]) continue;
    const double limit = heard_[i] ? opt_.rank_timeout_s : std::max(10 * opt_.rank_timeout_s, 120.0);
    const double quiet = seconds_between(last_[i], now);
    if (quiet > limit)
      fail("rank ", owners_[i], " (the owner of a group, on host ", world_->host_of(owners_[i]),
           ") sent nothing to rank 0 for ", std::lround(quiet), " s (stuck, or too slow for --rank-timeout ",
           opt_.rank_timeout_s, ")");
  }
}

void QueueServer::drain(LoopResult& loop) {
  if (!owners_.empty()) {
    auto all_bye = [&] {
      for (char b : bye_)
        if (!b) return false;
      return true;
    };
    while (!all_bye()) {
      serve();
      if (!all_bye()) nap();
    }
    for (int r : owners_) world_->send(r, kFromRoot, {kRelease});
    if (!opt_.quiet) {  // how the queue spread the work
      std::string line = opt_.tag + "records by group owner: rank 0 " + std::to_string(own_ran_);
      for (size_t i = 0; i < owners_.size(); ++i)
        line += ", rank " + std::to_string(owners_[i]) + " " + std::to_string(ran_by_[i]);
      std::cerr << line + "\n";
    }
    world_->flush();
  }
  loop.total.add(remote_total_);
  loop.ran += remote_ran_;
  loop.refused += remote_refused_;
  loop.dropped = loop.dropped || remote_dropped_;
  for (auto& p : remote_per_prompt_) loop.per_prompt.push_back(std::move(p));
  remote_per_prompt_ = nlohmann::json::array();
}

// ---- the other owners ----

QueueClient::QueueClient(Comm& world, const QueueOptions& opt)
    : world_(world), opt_(opt), beat_s_(opt.rank_timeout_s > 0 ? std::min(opt.rank_timeout_s / 4, 10.0) : 0) {
  last_sent_ = Clock::now();
}

void QueueClient::send(const std::vector<int32_t>& m) {
  world_.send(0, kToRoot, m);
  last_sent_ = Clock::now();
}

void QueueClient::read_messages() {
  int from = -1;
  while (world_.try_recv(0, kFromRoot, msg_, &from)) {
    LA_CHECK(!msg_.empty(), "request queue: empty message from rank 0");
    switch (msg_[0]) {
      case kAssign:
        LA_CHECK(msg_.size() == 2 && want_out_ && assigned_ < 0, "request queue: unexpected ASSIGN from rank 0");
        assigned_ = msg_[1];
        want_out_ = false;
        break;
      case kNoMore:
        want_out_ = false;
        no_more_ = true;
        break;
      case kStop:
        LA_CHECK(msg_.size() == 2, "request queue: bad STOP message");
        stop_told_ = true;  // rank 0 knows: no STOPPED back
        request_stop(msg_[1]);
        break;
      case kRelease:
        released_ = true;
        break;
      case kShare: {
        LA_CHECK(msg_.size() >= 2 && msg_[1] >= 0 && static_cast<size_t>(msg_[1]) <= msg_.size() - 2,
                 "request queue: bad SHARE message");
        if (on_share && !released_) on_share(std::vector<int32_t>(msg_.begin() + 2, msg_.end()), size_t(msg_[1]));
        break;
      }
      default:
        fail("request queue: unknown message ", msg_[0], " from rank 0");
    }
  }
}

void QueueClient::poll() {
  read_messages();
  const int sig = stop_signal();
  if (sig != 0 && !stop_told_) {  // this rank (or a rank of its group) got the signal: rank 0 stops the others
    stop_told_ = true;
    send({kStopped, sig});
  }
  if (beat_s_ > 0 && seconds_since(last_sent_) > beat_s_) send({kBeat});
}

int64_t QueueClient::next(bool wait) {
  poll();
  for (;;) {
    if (stop_signal() != 0) return kNone;
    if (assigned_ >= 0) {
      const int64_t i = assigned_;
      assigned_ = -1;
      return i;
    }
    if (no_more_) return kNone;
    if (!want_out_) {
      send({kWant});
      want_out_ = true;
    }
    if (!wait) return kLater;
    nap();
    poll();
  }
}

void QueueClient::finished(const nlohmann::json& record) {
  std::vector<int32_t> m{kDone};
  pack_text(m, record.dump());
  world_.post(0, kToRoot, m);  // never waits for rank 0 (a large record goes when rank 0 takes it)
  last_sent_ = Clock::now();
}

void QueueClient::finish(const LoopResult& loop) {
  poll();  // a signal that came during the last step still reaches rank 0 before the BYE
  send({kBye, loop.interrupted ? 1 : 0, loop.dropped ? 1 : 0, static_cast<int32_t>(loop.refused)});
  while (!released_) {  // rank 0 may still run its own requests: no timeout here (rank 0 watches the owners)
    read_messages();
    if (!released_) nap();
  }
  world_.flush();
}

}  // namespace la::cli
