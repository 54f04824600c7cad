#include "cli/agent/process_state.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

namespace hora::cli {
namespace {

struct Stat {
  pid_t pid = -1;
  char state = '?';
  pid_t ppid = -1;
  pid_t pgrp = -1;
};

// pid, state, ppid and pgrp of one stat line; nullopt when malformed.
std::optional<Stat> parse_stat(std::string_view line) {
  const auto close = line.rfind(')');
  if (close == std::string_view::npos || close + 2 >= line.size()) return std::nullopt;
  Stat s;
  s.pid = static_cast<pid_t>(std::atol(std::string(line.substr(0, line.find(' '))).c_str()));
  const std::string rest(line.substr(close + 2));  // "T 1 1234 ..."
  char state = 0;
  long ppid = 0;
  long pgrp = 0;
  if (std::sscanf(rest.c_str(), "%c %ld %ld", &state, &ppid, &pgrp) != 3) return std::nullopt;
  s.state = state;
  s.ppid = static_cast<pid_t>(ppid);
  s.pgrp = static_cast<pid_t>(pgrp);
  return s;
}

bool is_stuck(char state) { return state == 'T' || state == 't' || state == 'D'; }

}  // namespace

std::string StuckProcess::describe() const {
  switch (state) {
    case 'T': return "state T, stopped";
    case 't': return "state t, stopped by a debugger";
    case 'D': return "state D, in uninterruptible sleep";
    default: return fmt::format("state {}", state);
  }
}

std::optional<char> parse_stat_state(std::string_view stat_line) {
  const auto s = parse_stat(stat_line);
  if (!s) return std::nullopt;
  return s->state;
}

std::map<pid_t, StuckProcess> stuck_processes_of_guards(const std::vector<pid_t>& guard_pids,
                                                        const std::string& proc_root) {
  std::map<pid_t, StuckProcess> found;
  if (guard_pids.empty()) return found;
  const std::set<pid_t> guards(guard_pids.begin(), guard_pids.end());
  std::vector<Stat> all;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;  // gone meanwhile
    if (auto s = parse_stat(line)) all.push_back(*s);
  }
  // Each rank: a guard's children, each the leader of its own process group.
  std::map<pid_t, pid_t> guard_of_group;
  for (const Stat& s : all) {
    if (guards.count(s.ppid) != 0) guard_of_group[s.pid] = s.ppid;
  }
  for (const Stat& s : all) {
    if (!is_stuck(s.state)) continue;
    pid_t guard = -1;
    if (guards.count(s.ppid) != 0) {
      guard = s.ppid;
    } else if (const auto it = guard_of_group.find(s.pgrp); it != guard_of_group.end()) {
      guard = it->second;
    }
    if (guard > 0) found.emplace(guard, StuckProcess{s.pid, s.state});
  }
  return found;
}

std::optional<StuckProcess> stuck_process_of_guard(pid_t guard_pid, const std::string& proc_root) {
  const auto found = stuck_processes_of_guards({guard_pid}, proc_root);
  if (found.empty()) return std::nullopt;
  return found.begin()->second;
}

}  // namespace hora::cli
