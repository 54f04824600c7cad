// The fixed job's failure policy (docs/launcher.md, "Failure policy") as the supervisor runs it
// for a job of one round (cli/elastic/supervisor.h): what a rank's exit, a lost rendezvous
// connection, --start-timeout and the stall check mean for the job, and when the job ends with
// which cause. An elastic job does not use it: there a lost worker starts the next round.
//
// - The first rank to fail is the cause ("rank 1 on h2 exited with code 1"), never a rank that
//   died of its consequences: FailureVerdict (failure_verdict.h) orders what was heard, the
//   verdict settles for verdict_settle while other ranks run, and a rank it awaits gets
//   drop_grace to exit.
// - A rank that lost its rendezvous connection without goodbye and still runs drop_grace later
//   has failed (exit 1).
// - Ranks missing at the rendezvous at --start-timeout end the job (exit 1), unless no rank
//   reached it at all (a command that does not use hora).
// - The stall check (stall_watch.h) looks at the ranks' processes once a second.
// - A rank that exited 0 while others ran is named when the job then fails.
//
// Threading: every method and every timer runs on the supervisor's io thread: the state is that
// thread's role (hora::ThreadRole, common/thread_annotations.h), which each public method and
// handler asserts; the Job callbacks are called on it.
#pragma once

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
#include "cli/spawn/failure_verdict.h"
#include "cli/spawn/rank_process.h"
#include "cli/spawn/stall_watch.h"
#include "common/thread_annotations.h"

namespace hora::cli {

class FixedFailurePolicy {
 public:
  struct Settings {
    std::chrono::milliseconds drop_grace{3000};
    std::chrono::milliseconds verdict_settle{300};
    std::chrono::milliseconds start_timeout{30000};
    StallSettings stall;
  };

  // What the policy asks of the supervisor.
  struct Job {
    int size = 0;
    std::function<std::string(int rank)> who;  // "rank 2 on h2"
    std::function<bool(int rank)> running;
    std::function<bool()> ending;  // the job is ending: no more verdicts
    // The ranks that reached hora's rendezvous (hora::init()) or Horovod's (hvd.init()).
    std::function<std::set<int>()> ranks_seen;
    // A value ranks stored at hora's rendezvous (nullopt: none).
    std::function<std::optional<std::string>(const std::string& key)> rendezvous_value;
    // Which of `ranks` are stopped, traced or in D (RankProcesses::stuck).
    std::function<std::map<int, StuckProcess>(const std::vector<int>& ranks)> stuck;
    std::function<void(std::string cause, int code)> end_job;
  };

  FixedFailurePolicy(boost::asio::io_context& io, Settings settings, Job job);
  FixedFailurePolicy(const FixedFailurePolicy&) = delete;
  FixedFailurePolicy& operator=(const FixedFailurePolicy&) = delete;

  // Every rank has been started: the stall check and --start-timeout begin.
  void start();
  void connected(int rank);
  // A rank left the rendezvous: `clean` with a goodbye (`reason` says whether from the exit
  // handler, rendezvous/wire.h), else its connection dropped.
  void disconnected(int rank, bool clean, const std::string& reason);
  // A rank's exit was recorded (the supervisor finishes the job afterwards if it can).
  void exited(int rank, const ExitStatus& status);
  // The job is over: every timer is cancelled.
  void cancel();

 private:
  void decide() HORA_REQUIRES(io_thread_);
  void end_with_verdict(const FailureVerdict::Failure& f) HORA_REQUIRES(io_thread_);
  void await_rank(int rank, const FailureVerdict::Failure& cause, const std::string& why)
      HORA_REQUIRES(io_thread_);
  int blamed_by(int rank) const HORA_REQUIRES(io_thread_);
  std::map<int, StuckProcess> stuck_ranks() const HORA_REQUIRES(io_thread_);
  std::optional<std::pair<int, StuckProcess>> stuck_rank(int except) const
      HORA_REQUIRES(io_thread_);
  void arm_stall_check() HORA_REQUIRES(io_thread_);
  void on_start_timeout() HORA_REQUIRES(io_thread_);
  bool running_others(int rank) const HORA_REQUIRES(io_thread_);

  hora::ThreadRole io_thread_;
  boost::asio::io_context& io_;
  const Settings settings_;
  const Job job_;
  FailureVerdict verdict_ HORA_GUARDED_BY(io_thread_);
  StallWatch stall_ HORA_GUARDED_BY(io_thread_);
  // Per rank: its drop grace, from a rendezvous connection lost without goodbye to its exit.
  std::map<int, std::unique_ptr<boost::asio::steady_timer>> drop_timers_
      HORA_GUARDED_BY(io_thread_);
  boost::asio::steady_timer settle_timer_ HORA_GUARDED_BY(io_thread_);  // verdict_settle
  boost::asio::steady_timer await_timer_ HORA_GUARDED_BY(io_thread_);   // an awaited rank's
  boost::asio::steady_timer start_timer_ HORA_GUARDED_BY(io_thread_);   // --start-timeout
  boost::asio::steady_timer stall_timer_ HORA_GUARDED_BY(io_thread_);   // once a second
  bool cancelled_ HORA_GUARDED_BY(io_thread_) = false;
};

}  // namespace hora::cli
