// The launcher's half of the stall check (docs/launcher.md, "Failure policy"), apart from its
// timer: given which ranks' processes are stuck now (stopped, traced or in uninterruptible
// sleep, cli/agent/process_state.h), it says what to warn about and when the job must end.
//
// - A rank stuck for the warning time (HORA_STALL_CHECK_SECONDS, 60 s) is named once.
// - A rank stuck for the shutdown time (HORA_STALL_SHUTDOWN_SECONDS, when above 0) ends the job.
// - A stopped or traced process makes no progress until someone resumes it, whatever the load:
//   it is named within seconds (kStoppedNamedAfter), not after the warning time meant for slow
//   ranks (a rank in a long computation or on a loaded host is running or sleeping, never T).
//
// Threading: none of its own; the supervisor calls it on its io thread (a member it guards).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/agent/process_state.h"

namespace hora::cli {

// The stall settings the ranks see (cli/launch/job_config.h reads them): -x, the flags, or
// horarun's environment.
struct StallSettings {
  bool enabled = true;
  double warning_seconds = 60;
  double shutdown_seconds = 0;  // 0: never
};

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // A stopped (T) or traced (t) rank is named after this long (looked at once a second: within
  // 3-4 s).
  static constexpr std::chrono::seconds kStoppedNamedAfter{2};

  struct Findings {
    std::vector<std::string> warnings;    // in rank order
    std::optional<std::string> shutdown;  // the job's cause when a rank is stuck too long
  };

  explicit StallWatch(StallSettings settings) : settings_(settings) {}

  // One look at `now`: `stuck_now` holds the ranks stuck now (any other is running normally).
  // `who` names a rank ("rank 2 on h2").
  Findings look(Clock::time_point now, const std::map<int, StuckProcess>& stuck_now,
                const std::function<std::string(int)>& who);

  // Whether `rank` was already stuck at an earlier look (a moment of D is only disk I/O).
  bool stuck_before(int rank) const { return stuck_since_.count(rank) != 0; }

 private:
  struct Stuck {
    Clock::time_point since;
    bool warned = false;
  };
  StallSettings settings_;
  std::map<int, Stuck> stuck_since_;
  std::set<int> stopped_named_;  // named as stopped or traced since last seen running
};

// What --start-timeout finds (docs/launcher.md): `seen` reached the rendezvous, `running` still
// run. A command that never calls hora::init() (a shell script, `hostname`) is a plain job: with
// no rank at the rendezvous there is nobody waiting for the missing ones (`not_enforced` says
// so). Otherwise `missing` names the running ranks that did not arrive; the job's cause
// (`failure`) is empty when none is missing.
struct StartTimeoutFinding {
  std::string not_enforced;
  std::string failure;
};
StartTimeoutFinding start_timeout_finding(const std::set<int>& seen,
                                          const std::vector<int>& running, int size,
                                          std::chrono::milliseconds start_timeout,
                                          const std::function<std::string(int)>& who);

}  // namespace hora::cli
