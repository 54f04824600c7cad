#include "cli/spawn/failure_verdict.h"

#include <algorithm>

#include <fmt/format.h>

namespace hora::cli {

void FailureVerdict::connected(int rank) {
  leave_order_.erase(rank);
  leaving_at_exit_.erase(rank);
}

void FailureVerdict::left(int rank, bool clean, bool at_exit) {
  leave_order_.emplace(rank, static_cast<int>(leave_order_.size()));
  if (!clean) {
    dropped_.insert(rank);
  } else if (at_exit) {
    leaving_at_exit_.insert(rank);
  }
}

void FailureVerdict::exited_early(int rank, bool reached_rendezvous) {
  if (early_exit_ >= 0) return;
  early_exit_ = rank;
  early_exit_reached_rendezvous_ = reached_rendezvous;
}

bool FailureVerdict::failed(int rank, const ExitStatus& status) {
  failures_.push_back(Failure{rank, status});
  return failures_.size() == 1;
}

bool FailureVerdict::left_before(int a, int b) const {
  const auto da = leave_order_.find(a);
  if (da == leave_order_.end()) return false;
  const auto db = leave_order_.find(b);
  return db == leave_order_.end() || da->second < db->second;
}

bool FailureVerdict::awaitable(int rank) const {
  return (dropped_.count(rank) != 0 || leaving_at_exit_.count(rank) != 0) &&
         no_longer_awaited_.count(rank) == 0;
}

FailureVerdict::Decision FailureVerdict::await(int rank, const Failure& cause, std::string why) {
  Decision d;
  d.kind = Decision::Kind::kAwait;
  d.cause = cause;
  d.awaited = rank;
  d.why = std::move(why);
  d.newly_awaited = awaited_ != rank;
  awaited_ = rank;
  return d;
}

FailureVerdict::Decision FailureVerdict::decide(const Ranks& ranks) {
  Decision d;
  if (failures_.empty()) return d;
  bool others_running = false;
  for (int q = 0; q < ranks.size; ++q) others_running |= ranks.running(q);
  // An agent's end needs no settling, nor a settle timer that a loop busy with the others'
  // output may serve late.
  for (const Failure& f : failures_) {
    if (f.status.agent_failure.empty()) continue;
    d.kind = Decision::Kind::kAgent;
    d.cause = f;
    return d;
  }
  if (!settled_ && others_running) return d;
  const Failure* cause = &failures_.front();
  for (const Failure& f : failures_) {
    if (left_before(f.rank, cause->rank)) cause = &f;
  }
  for (int q = 0; q < ranks.size; ++q) {
    if (ranks.running(q) && awaitable(q) && left_before(q, cause->rank)) {
      return await(q, *cause,
                   leaving_at_exit_.count(q) != 0
                       ? "left the rendezvous first, from its exit handler"
                       : "lost its rendezvous connection first");
    }
  }
  // Connections that close at nearly the same moment are read in any order, but a rank whose
  // collective failed for a lost peer said which peer: follow that to the rank that failed
  // first, waiting for it if it still runs.
  std::set<int> visited{cause->rank};
  for (int b = ranks.blamed_by(cause->rank); b >= 0 && visited.insert(b).second;
       b = ranks.blamed_by(cause->rank)) {
    const auto found = std::find_if(failures_.begin(), failures_.end(),
                                    [b](const Failure& f) { return f.rank == b; });
    if (found != failures_.end()) {
      cause = &*found;
      continue;
    }
    if (ranks.running(b) && no_longer_awaited_.count(b) == 0) {
      return await(b, *cause, "its peer failed because of it");
    }
    break;  // it exited 0 (early_exit_note says so) or never started
  }
  d.kind = Decision::Kind::kVerdict;
  d.cause = *cause;
  return d;
}

std::string FailureVerdict::early_exit_note(int failed, bool uses_rendezvous,
                                            const std::function<std::string(int)>& who) const {
  if (early_exit_ < 0 || early_exit_ == failed || !uses_rendezvous) return "";
  return fmt::format(
      "; {} had already exited with code 0 {}, and the others still needed it: a rank that "
      "ends early leaves them without a peer",
      who(early_exit_),
      early_exit_reached_rendezvous_ ? "while the job was running"
                                     : "without reaching hora::init()");
}

}  // namespace hora::cli
