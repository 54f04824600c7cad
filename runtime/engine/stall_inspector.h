// The stall check: finds ops that some ranks submitted and others did not.
//
// It reads the replicated MessageTable, whose first_seen times date each name from its earliest
// submission (announcements carry how long the request had waited on its rank). Requests that
// were cache hits never enter the table, so the engine asks should_uncache() about each waiting
// hit: after the warning time it invalidates the cache bit, which makes every rank announce the
// name in full and lets the table name the missing ranks.
//
// Rank 0 logs the warning (one block listing every stalled op, at most once per warning time);
// every rank computes the names to abandon (HORA_STALL_SHUTDOWN_SECONDS) from its own clock and
// proposes them in the next negotiation, where the union is applied identically everywhere.
#pragma once

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "runtime/engine/engine_options.h"
#include "runtime/engine/message_table.h"

namespace hora::detail::engine {

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;
  using Sink = std::function<void(const std::string& block)>;

  StallInspector(const EngineOptions& options, int rank, Sink sink);

  bool enabled() const { return enabled_; }
  // Whether a cache hit waiting since `submitted` should be announced in full.
  bool should_uncache(Clock::time_point submitted, Clock::time_point now) const;
  // Logs the warning when due (rank 0) and returns names whose wait passed the shutdown time and
  // that this rank has not proposed yet.
  std::vector<std::string> check(const MessageTable& table, Clock::time_point now);
  // The name left the table (ran, failed or was abandoned): it may be proposed again later.
  void forget(const std::string& name) { proposed_.erase(name); }

  // "0, 2-5, 7"
  static std::string format_ranks(const std::vector<int>& ranks);
  // The warning block for these stalled ops (exposed for tests).
  std::string format_warning(const std::vector<MessageTable::Pending>& stalled,
                             Clock::time_point now) const;

 private:
  bool enabled_;
  int rank_;
  Sink sink_;
  std::chrono::milliseconds warning_;
  std::chrono::milliseconds shutdown_;  // 0: never
  Clock::time_point last_check_{};
  Clock::time_point last_warning_{};
  bool warned_ = false;
  std::set<std::string> proposed_;
};

}  // namespace hora::detail::engine
