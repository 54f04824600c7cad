// --host-discovery-script: running it and reading what it prints (docs/elastic.md).
//
// The script prints the hosts available now, one a line, as horovodrun's
// (horovod/runner/elastic/discovery.py, HostDiscoveryScript):
//   host:slots    e.g. node1:4
//   host          the slots of --slots-per-host (without it such a line is an error)
// and also, as -H takes them, user@host:slots and [ipv6]:slots. Whitespace around a line and
// blank lines are ignored. A host printed twice with the same slots counts once (Horovod
// reads the lines into a set); printed twice with different slots it is an error naming both
// lines (Horovod would keep either, at random). A host with 0 slots is not available: it is left
// out of the result. The hosts come out in the order the script first printed them.
//
// The script runs as horovodrun runs it: through `/bin/sh -c SCRIPT` (so SCRIPT may carry
// arguments), in its own process group, with stdin /dev/null and horarun's environment and
// working directory. Its stdout is read (at most kMaxOutput bytes), the end of its stderr is
// kept for the error message. When it exits (or is killed at its deadline), whatever it left in
// its process group is killed; a process that left the group (setsid) and still holds its
// stdout or stderr kLeftoverGrace later is found by the pipe it holds, killed, and named in the
// result's warning, so a run never outlives its deadline nor leaves a process behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/base/errors.h"
#include "cli/hosts/host_list.h"

namespace hora::cli {

// What the script printed cannot be read; the message names the line:
// "line 3: 'h1:x' is not host:slots (slot count 'x' is not a number)".
class DiscoveryError : public Error {
  using Error::Error;
};

// Parses the script's stdout. Throws DiscoveryError.
std::vector<HostSpec> parse_discovery_output(std::string_view text,
                                             std::optional<int> slots_per_host);

// The warning for a listing that names this machine a second time ("127.0.0.1:2" beside
// "localhost"), which the job ignores: `host` is ignored, `kept` is the name the job uses.
std::string second_name_warning(const HostSpec& host, const std::string& kept);

// One run of the script.
struct DiscoveryResult {
  bool ok = false;
  std::vector<HostSpec> hosts;  // when ok: parse_discovery_output() of its stdout
  // When not ok: what went wrong, naming the script: its exit code or signal and the last lines
  // of its stderr, the deadline, a line it printed that is not host:slots, too much output, or
  // why it could not be started.
  std::string error;
  // Not empty when the run had to kill processes the script left holding its output (named).
  std::string warning;
};

// A run of the script that the caller drives without blocking (for an event loop): start it,
// then call poll() until it returns a result. The destructor kills what is left of the run
// (the whole process group, SIGKILL) and reaps the script, so every process a run started is
// stopped when the object goes, whatever happened. The script's pid is reaped by this object
// only: the caller must not reap children with waitpid(-1).
class DiscoveryRun {
 public:
  // Most bytes of stdout read; more is an error (and the script is killed).
  static constexpr std::size_t kMaxOutput = 1 << 20;
  // Bytes of the end of stderr kept for the error message; it shows the last kStderrLines.
  static constexpr std::size_t kStderrKept = 4096;
  static constexpr std::size_t kStderrLines = 5;
  // After the script exited, how long a process it left outside its process group may keep its
  // stdout or stderr open before it is killed.
  static constexpr std::chrono::milliseconds kLeftoverGrace{1000};

  // Starts `/bin/sh -c script`. A failure to start is not thrown: the first poll() returns it.
  DiscoveryRun(std::string script, std::optional<int> slots_per_host,
               std::chrono::steady_clock::time_point deadline);
  ~DiscoveryRun();
  DiscoveryRun(const DiscoveryRun&) = delete;
  DiscoveryRun& operator=(const DiscoveryRun&) = delete;

  // Reads what the script wrote, waiting at most `wait` (and never past the deadline). Returns
  // the result once the script exited (or was killed at the deadline, or printed too much);
  // nullopt while it runs. After a result, every process of the run is gone; a further call
  // returns the same result.
  std::optional<DiscoveryResult> poll(std::chrono::milliseconds wait);

  // The pipes to wait on from an event loop (readable: call poll(0)); -1 once closed. The
  // deadline is the caller's to watch as well: poll() after it kills the script.
  int stdout_fd() const { return out_fd_; }
  int stderr_fd() const { return err_fd_; }
  // The script's pid (its process group too); -1 when it did not start or was reaped.
  pid_t pid() const { return pid_; }

 private:
  void read_available();
  void finish(DiscoveryResult result);
  void kill_and_reap();
  std::string kill_pipe_holders();
  std::string stderr_tail() const;

  std::string script_;
  std::optional<int> slots_per_host_;
  std::chrono::steady_clock::time_point deadline_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  ino_t out_pipe_ = 0;  // the pipes' inodes, to find processes that hold their write ends
  ino_t err_pipe_ = 0;
  std::optional<std::chrono::steady_clock::time_point> exited_at_;
  bool leftovers_killed_ = false;
  std::string warning_;
  std::string out_;
  std::string err_;  // the last kStderrKept bytes
  bool too_much_ = false;
  std::optional<int> wait_status_;  // the script's, once it exited
  std::optional<DiscoveryResult> result_;
};

// Runs the script to its end or to `deadline` (then it is killed), blocking the caller at most
// until the deadline (plus the time to reap a killed process).
DiscoveryResult run_discovery_script(const std::string& script, std::optional<int> slots_per_host,
                                     std::chrono::steady_clock::time_point deadline);

}  // namespace hora::cli
