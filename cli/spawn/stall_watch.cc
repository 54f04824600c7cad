#include "cli/spawn/stall_watch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/duration.h"

namespace hora::cli {
namespace {

std::string duration_text(StallWatch::Clock::duration d) {
  return hora::format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(d));
}

}  // namespace

StallWatch::Findings StallWatch::look(Clock::time_point now,
                                      const std::map<int, StuckProcess>& stuck_now,
                                      const std::function<std::string(int)>& who) {
  Findings out;
  for (auto it = stuck_since_.begin(); it != stuck_since_.end();) {
    if (stuck_now.count(it->first) != 0) {
      ++it;
      continue;
    }
    stopped_named_.erase(it->first);
    it = stuck_since_.erase(it);
  }
  const auto warn_after = std::chrono::duration<double>(settings_.warning_seconds);
  for (const auto& [r, stuck] : stuck_now) {
    Stuck& s = stuck_since_.emplace(r, Stuck{now, false}).first->second;
    const auto stalled = now - s.since;
    if (settings_.shutdown_seconds > 0 &&
        stalled >= std::chrono::duration<double>(settings_.shutdown_seconds)) {
      out.shutdown = fmt::format(
          "{} stopped responding ({}) for {} (--stall-check-shutdown-time-seconds); the others "
          "cannot go on without it",
          who(r), stuck.describe(), duration_text(stalled));
      return out;
    }
    const bool stopped = stuck.state == 'T' || stuck.state == 't';
    if (stopped && stalled >= kStoppedNamedAfter && stopped_named_.insert(r).second) {
      out.warnings.push_back(fmt::format(
          "{} is {} (pid {}) for {}; the other ranks wait for it: resume it (kill -CONT {}) or "
          "end the job",
          who(r), stuck.describe(), stuck.pid, duration_text(stalled), stuck.pid));
    }
    if (!s.warned && stalled >= warn_after) {
      s.warned = true;
      out.warnings.push_back(
          fmt::format("stall check: {} stopped responding ({}) {} ago; the other ranks wait for "
                      "it (--stall-check-warning-time-seconds)",
                      who(r), stuck.describe(), duration_text(stalled)));
    }
  }
  return out;
}

StartTimeoutFinding start_timeout_finding(const std::set<int>& seen,
                                          const std::vector<int>& running, int size,
                                          std::chrono::milliseconds start_timeout,
                                          const std::function<std::string(int)>& who) {
  StartTimeoutFinding out;
  if (seen.empty()) {
    out.not_enforced = fmt::format(
        "no rank reached the rendezvous within {}; not enforcing --start-timeout (the command "
        "does not seem to use hora)",
        hora::format_duration(start_timeout));
    return out;
  }
  std::vector<std::string> missing;
  for (int r : running) {
    if (seen.count(r) == 0) missing.push_back(who(r));
  }
  if (missing.empty()) return out;
  out.failure = fmt::format(
      "{} did not reach the rendezvous within {} ({} of {} ranks did); the rank never called "
      "hora::init() (nor hvd.init()), or it needs longer to start: raise --start-timeout",
      fmt::join(missing, ", "), hora::format_duration(start_timeout), seen.size(), size);
  return out;
}

}  // namespace hora::cli
