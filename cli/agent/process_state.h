// What the kernel says about a rank's processes (/proc/<pid>/stat), so the launcher can
// name a rank that stopped making progress rather than the healthy rank that timed out waiting
// for it: a rank SIGSTOPped (state T), held by a debugger (t), or stuck in
// uninterruptible sleep (D).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hora::cli {

struct StuckProcess {
  pid_t pid = -1;
  char state = '?';  // T, t or D
  // "state T, stopped"
  std::string describe() const;
};

// The state letter of a /proc/<pid>/stat line ("1234 (a (b) c) T 1 ..."): the field after the
// last ')'. nullopt when malformed.
std::optional<char> parse_stat_state(std::string_view stat_line);

// The first process of the rank run by the local guard `guard_pid` (the guard's children and
// their process groups) that is stopped, traced or in uninterruptible sleep; nullopt when every
// one is running or sleeping normally (or the guard is gone). Reads /proc under `proc_root`.
std::optional<StuckProcess> stuck_process_of_guard(pid_t guard_pid,
                                                   const std::string& proc_root = "/proc");

// The same for several guards with one pass over /proc: guard pid -> its rank's stuck process,
// for the guards that have one.
std::map<pid_t, StuckProcess> stuck_processes_of_guards(const std::vector<pid_t>& guard_pids,
                                                        const std::string& proc_root = "/proc");

}  // namespace hora::cli
