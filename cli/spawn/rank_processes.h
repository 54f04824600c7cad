// The processes of a job's ranks, as the supervisor runs them for fixed-size and elastic jobs
// (cli/elastic/supervisor.h): each one started with its events, its output split into lines and
// relayed under its rank's prefix, asked to end and killed when it outlives the graces, and the
// answer to "has every one exited, with its output drained?". What a failure means and when the job
// ends is the supervisor's business, not this one's.
//
// Keyed by an id: the rank in a fixed job, the worker id in an elastic one, whose output prefix
// (its rank) changes from round to round (set_output_rank()).
//
// Threading: every method and every event runs on the io_context's thread (the supervisor's):
// the state is that thread's role (hora::ThreadRole, common/thread_annotations.h); each public
// method and each handler asserts it, and clang's -Wthread-safety checks the rest. The hooks are
// called on that thread, never while a method of this class is in the middle of a change.
//
// Ownership: the processes (and so their guards: a RankProcess's destructor ends its guard) live
// as long as this object.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cli/agent/process_state.h"
#include "cli/output/line_splitter.h"
#include "cli/output/output.h"
#include "cli/spawn/guard_request.h"
#include "cli/spawn/rank_process.h"
#include "common/thread_annotations.h"

namespace hora::cli {

// How long a process may take to end (SupervisorConfig holds the job's values and says why).
struct ProcessGraces {
  std::chrono::milliseconds abort_grace{2000};    // the abort notice to SIGTERM
  std::chrono::milliseconds kill_grace{3000};     // the guard's SIGTERM to SIGKILL
  std::chrono::milliseconds guard_slack{2000};    // then a guard still running is killed
  std::chrono::milliseconds drain_timeout{3000};  // output still open after the last exit
};

class RankProcesses {
 public:
  struct Hooks {
    std::function<std::string(int id)> who;                  // "rank 2 on h2", for warnings
    std::function<void(int id, const ExitStatus&)> on_exit;  // after the exit is recorded
    std::function<void()> on_output_closed;                  // one stream of one process ended
  };

  RankProcesses(boost::asio::io_context& io, Output& output, ProcessGraces graces, Hooks hooks);
  ~RankProcesses();
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;

  // Starts `process` as `id` (not used before) with `request`; its output goes out under
  // `output_rank`'s prefix. Rethrows what RankProcess::start() throws: the id then counts as
  // never started, and the process object is kept (its destructor ends a guard that was spawned
  // before the failure).
  void start(int id, std::unique_ptr<RankProcess> process, const GuardRequest& request,
             int output_rank);
  // From now on `id`'s output goes out under `rank`'s prefix (no effect on an id never started).
  void set_output_rank(int id, int rank);

  bool started(int id) const;
  // Started and not exited.
  bool running(int id) const;
  // How it ended; nullopt while it runs or when it never started.
  std::optional<ExitStatus> exit_status(int id) const;
  // Its guard's pid on this machine; -1 when it is remote or not running.
  int local_guard_pid(int id) const;

  // Asks the guard to end its rank (SIGTERM to the process group, SIGKILL after kill_grace).
  void terminate(int id);
  // Ends the guard at once (cli/spawn/rank_process.h).
  void kill(int id);
  // terminate(), and kill() with a warning if it still runs kill_grace + guard_slack later.
  void stop(int id);

  // The end of a job: the running processes not in `hear_abort` are asked to end now; the ones
  // in it (connected to the rendezvous, told why the job ends) get abort_grace to exit by
  // themselves, then every one still running is asked; kill_grace + guard_slack after that,
  // kill_all(). An abort_grace of zero asks every one now.
  void end_all(const std::set<int>& hear_abort, std::chrono::milliseconds abort_grace);
  // Kills every running guard, with a warning naming each.
  void kill_all();

  // Every started process has exited.
  bool all_exited() const;
  // Every started process has exited and its output is closed. Once every one exited, output
  // still open drain_timeout later (a process the rank left behind holds it) is no longer read,
  // with a warning naming the rank.
  bool exited_and_drained();

  // The processes among `ids` that are stopped, traced or in uninterruptible sleep
  // (cli/agent/process_state.h), by id: this machine's looked up in /proc, other hosts' as their
  // agents last reported them.
  std::map<int, StuckProcess> stuck(const std::vector<int>& ids) const;

  // Cancels every timer (the job is over).
  void cancel_timers();

 private:
  struct Entry {
    std::unique_ptr<RankProcess> process;
    std::array<LineSplitter, 2> splitters;
    std::array<bool, 2> open{false, false};
    std::optional<ExitStatus> exit;
    bool started = false;
    int output_rank = 0;
    std::unique_ptr<boost::asio::steady_timer> kill_timer;  // stop()'s
  };

  const Entry* find(int id) const HORA_REQUIRES(io_thread_);
  Entry& at(int id) HORA_REQUIRES(io_thread_);
  bool is_running(const Entry& e) const HORA_REQUIRES(io_thread_) { return e.started && !e.exit; }
  void on_output(int id, Stream s, std::string_view data) HORA_REQUIRES(io_thread_);
  void on_output_closed(int id, Stream s) HORA_REQUIRES(io_thread_);
  void on_exit(int id, const ExitStatus& status) HORA_REQUIRES(io_thread_);
  void kill_running() HORA_REQUIRES(io_thread_);
  // Kills `id`'s guard if it still runs, with the warning that it did not end after SIGTERM.
  void kill_late(int id) HORA_REQUIRES(io_thread_);

  hora::ThreadRole io_thread_;
  boost::asio::io_context& io_;
  Output& output_;
  const ProcessGraces graces_;
  const Hooks hooks_;
  std::map<int, Entry> entries_ HORA_GUARDED_BY(io_thread_);
  boost::asio::steady_timer end_timer_ HORA_GUARDED_BY(io_thread_);  // abort grace, kill grace
  boost::asio::steady_timer drain_timer_ HORA_GUARDED_BY(io_thread_);
  bool draining_ HORA_GUARDED_BY(io_thread_) = false;
};

}  // namespace hora::cli
