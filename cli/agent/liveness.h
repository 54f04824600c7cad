// Agent liveness (docs/agent.md, "Liveness"): every agent sends a HEARTBEAT frame each
// kHeartbeatInterval; the launcher counts any byte from the agent as a sign of life and ends a
// link silent for its agent timeout (a SIGSTOPped or hung agent, a host gone without a FIN).
// Pure logic on time points, so the decisions are unit-tested without processes
// (test/cli/agent/agent_test.cc).
#pragma once

#include <chrono>
#include <cstdlib>
#include <string>

#include "common/job_environment.h"

namespace hora::cli::agent {

inline constexpr std::chrono::milliseconds kHeartbeatInterval{1000};
// The default agent timeout: the launcher's stall check names a stopped local rank after a poll
// of 1 s; a remote agent gets this many missed heartbeats. HORA_AGENT_TIMEOUT_SECONDS changes it.
inline constexpr std::chrono::milliseconds kDefaultAgentTimeout{15000};
// How long the launcher waits for `kill -KILL` of an agent that stopped answering (its event
// loop waits meanwhile; the job is ending). The kill is a new exec over SSH (through the relaying
// agent for a relayed host), so it pays the user's login shell on that host: 0.65 s for root on
// the test hosts when the machine is quiet, over 5 s at load 12 on 2 cores, where a 5 s bound
// left stopped agents behind.
inline constexpr std::chrono::milliseconds kAgentKillTimeout{15000};
inline constexpr const char* kAgentTimeoutVariable = job_env::kAgentTimeoutSeconds;

// The agent timeout from `value` (HORA_AGENT_TIMEOUT_SECONDS; null or empty: the default).
// Values below 3 heartbeats are raised to 3 heartbeats; one that does not parse gives the default.
inline std::chrono::milliseconds agent_timeout_from(const char* value) {
  if (value == nullptr || *value == '\0') return kDefaultAgentTimeout;
  char* end = nullptr;
  const double s = std::strtod(value, &end);
  if (end == value || *end != '\0' || !(s > 0)) return kDefaultAgentTimeout;
  const auto ms = std::chrono::milliseconds(static_cast<long long>(s * 1000));
  return ms < 3 * kHeartbeatInterval ? 3 * kHeartbeatInterval : ms;
}

class Liveness {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Liveness(Clock::time_point now) : last_(now) {}

  // Something arrived from the agent.
  void heard(Clock::time_point now) { last_ = now; }
  Clock::duration silent(Clock::time_point now) const { return now - last_; }
  bool expired(Clock::time_point now, Clock::duration timeout) const {
    return silent(now) >= timeout;
  }

 private:
  Clock::time_point last_;
};

// Whether a relayed host's silence is its own: its bytes travel through its relaying host's
// link, so when that link is silent too, the relaying agent is the one to blame (and its
// timeout ends both).
inline bool relayed_silence_is_own(const Liveness& relayed, const Liveness& parent,
                                   Liveness::Clock::time_point now,
                                   Liveness::Clock::duration timeout) {
  return relayed.expired(now, timeout) && parent.silent(now) < 2 * kHeartbeatInterval;
}

}  // namespace hora::cli::agent
