// One rank's process as the supervisor sees it: AgentRankProcess (agent_rank_process.h), a guard
// (`horarun --guard`) started by its host's agent — this machine's own agent for local ranks, the
// preflight's agent over SSH or srun for remote ones. Every guard gets the same GuardRequest on
// its stdin (guard_request.h). Tests fill the seam with fakes (supervisor_test).
//
// Threading: every method and every event runs on the supervisor's io_context thread.
// Ownership: the RankProcess owns the guard (process or channel) and its descriptors; its
// destructor ends the guard if it is still running.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cli/agent/process_state.h"
#include "cli/hosts/host_list.h"
#include "cli/output/output.h"
#include "cli/spawn/guard_request.h"

namespace hora::cli {

// How a rank's process ended.
struct ExitStatus {
  bool signaled = false;
  int code = 0;    // exit code when !signaled
  int signal = 0;  // signal number when signaled
  // Not empty when the rank's host agent ended first and took the rank with it ("the agent on h2
  // (...) was terminated by signal 15 (SIGTERM)"): the job's verdict names the agent
  // (docs/errors.md, exit code 255).
  std::string agent_failure{};

  bool success() const { return !signaled && code == 0; }
  // "exited with code 3" / "was killed by signal 9 (SIGKILL)"
  std::string describe() const;
  // horarun's exit code for this status: code, or 128 + signal.
  int exit_code() const { return signaled ? 128 + signal : code; }
};

class RankProcess {
 public:
  struct Events {
    std::function<void(Stream, std::string_view data)> on_output;  // raw bytes, any split
    std::function<void(Stream)> on_output_closed;                  // end of that stream
    std::function<void(const ExitStatus&)> on_exit;                // the guard ended
  };

  virtual ~RankProcess() = default;

  // Starts the guard and sends it `request`. Events start flowing once the io_context runs.
  // Throws SpawnError naming the rank, the host and the step that failed.
  virtual void start(const GuardRequest& request, Events events) = 0;
  // Asks the guard to end the rank: SIGTERM to its process group, SIGKILL after the grace.
  virtual void terminate() = 0;
  // Last resort when the guard did not finish: ends the guard at once.
  virtual void kill() = 0;
  // Stops reading output (a process the rank left behind keeps the stream open).
  virtual void close_output() = 0;
  virtual bool running() const = 0;
  // The local guard's pid, for a look at its rank's process state (process_state.h); -1 for a
  // remote rank (its state is not known here).
  virtual int local_guard_pid() const { return -1; }
  // A remote rank's state as its host's agent last reported it (stopped, traced, in D; pid on
  // that host); nullopt while it runs, and always for local ranks (read from local_guard_pid()).
  virtual std::optional<StuckProcess> reported_state() const { return std::nullopt; }
};

// Makes the RankProcess for one rank on one host (the seam that tests fill with fakes).
class RankProcessFactory {
 public:
  virtual ~RankProcessFactory() = default;
  virtual std::unique_ptr<RankProcess> create(int rank, const HostSpec& host) = 0;
};

}  // namespace hora::cli
