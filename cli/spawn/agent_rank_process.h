// Every rank, local or remote: the guard (`<horarun> --guard`) runs as a child of its host's agent
// (cli/agent/). A remote host's agent is the one the preflight started over the host's SSH exec
// channel (or through srun): no new channel and no login shell per rank. The launcher's own host
// gets an agent too, `horarun --agent --report-pids` as horarun's child on a socketpair
// (cli/agent/pipe_stream.h), started when the factory is made: one code path for every rank.
//
// Protocol: the agent starts `<horarun> --guard` in the rank's working directory; the GuardRequest
// (cwd, env block with the job secret, argv) goes on the guard's stdin through the agent, so
// nothing secret appears on any command line. stdin stays open for the
// whole job: a later `terminate\n` asks the guard to stop its rank, and EOF (channel closed,
// connection lost, horarun or the agent killed) makes the guard stop it too. The guard exits with
// its rank's status or re-raises its rank's signal, which the agent reports in its EXIT frame.
//
// Threading: every host's agent stream is driven from the supervisor's io_context by one
// StreamDriver; the agent's handlers therefore run on the io_context thread, as RankProcess
// requires. Nothing here is thread-safe; nothing needs to be.
//
// Ownership: AgentRankProcessFactory owns the hosts' links (sessions and agents) and the
// drivers; it must outlive every AgentRankProcess it made (the launcher destroys the supervisor
// first). A process keeps a shared_ptr to its channel; destroying the process closes it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cli/agent/agent_link.h"
#include "cli/remote/remote_hosts.h"
#include "cli/spawn/rank_process.h"
#include "cli/spawn/stream_driver.h"
#include "ssh/session.h"

namespace hora::cli {

// ExitInfo (what the agent or sshd reported) as the supervisor's ExitStatus. A signal name
// ("KILL") becomes its number; a channel that failed (connection lost, closed by us) becomes exit
// code 255, as ssh(1) reports its own failures.
ExitStatus exit_status_from(const ssh::ExitInfo& info);

class AgentRankProcess : public RankProcess {
 public:
  // After kill(), how long the agent may take to answer before the rank is reported lost.
  static constexpr std::chrono::milliseconds kKillAnswerTimeout{2000};

  // `link`: how the agent is reached, for messages ("SSH connection", "srun step", "local
  // agent"). `local`: the agent runs on this machine, so the guard's pid (from the agent's
  // STARTED frame) is this machine's and local_guard_pid() gives it.
  AgentRankProcess(int rank, std::string host, StreamDriver& driver, agent::AgentLink& agent,
                   std::string link = "SSH connection", bool local = false);
  ~AgentRankProcess() override;

  void start(const GuardRequest& request, Events events) override;
  void terminate() override;
  // Closes the guard's channel (the guard then stops its rank). When the connection is dead (a
  // host that dropped off the network never answers), the rank is reported as exited with 255
  // after kKillAnswerTimeout, so the job ends instead of waiting for a host that is gone.
  void kill() override;
  void close_output() override;
  bool running() const override { return channel_ != nullptr && !exit_; }
  int local_guard_pid() const override {
    return local_ && running() && channel_->pid() > 0 ? channel_->pid() : -1;
  }
  std::optional<StuckProcess> reported_state() const override {
    return !local_ && running() ? channel_->reported_state() : std::nullopt;
  }

 private:
  void finish(const ssh::ExitInfo& info);

  int rank_;
  std::string host_;
  std::string link_;
  bool local_;
  StreamDriver& driver_;
  agent::AgentLink& agent_;
  Events events_;
  std::shared_ptr<agent::AgentChannel> channel_;
  std::optional<ExitStatus> exit_;
  bool output_closed_ = false;
  std::unique_ptr<boost::asio::steady_timer> kill_timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Makes an AgentRankProcess for every rank: through the preflight's agent for the hosts in
// `remote`, through a local agent for the others (at most one host: this machine). `local_guard`
// is horarun on this machine (this binary; tests give the built horarun).
class AgentRankProcessFactory : public RankProcessFactory {
 public:
  // How long the local agent may take to print its ready line.
  static constexpr std::chrono::seconds kLocalAgentStart{30};

  // `hosts`: the rank table's hosts; `remote`: the preflight's hosts by index into `hosts`.
  // Starts the local agent when a host is not in `remote`; throws SpawnError if it cannot.
  AgentRankProcessFactory(boost::asio::io_context& io, std::vector<HostSpec> hosts,
                          std::map<int, RemoteHost> remote,
                          std::string local_guard = "/proc/self/exe");
  ~AgentRankProcessFactory() override;

  std::unique_ptr<RankProcess> create(int rank, const HostSpec& host) override;

  // Elastic jobs: a host found during the job. add_remote() takes the preflight's host
  // (prepare_remote_hosts()); add_local() is this machine, whose agent starts now if it has none
  // (throws SpawnError if it cannot). Matched by name in create() from then on.
  void add_remote(const HostSpec& host, RemoteHost remote);
  void add_local(const HostSpec& host);

  // The hosts whose agent has ended (connection lost, agent killed): host name -> why. A rank
  // started there now fails at once; --max-restarts does not restart onto them.
  std::map<std::string, std::string> lost_hosts() const;

 private:
  // Destroyed driver first, then host (reverse declaration order): the driver stops before
  // the stream it drives, and the host's agent before its session.
  struct Driven {
    RemoteHost host;
    std::unique_ptr<StreamDriver> driver;
  };
  void drive(Driven& d);
  void start_local(int index);  // this machine's agent, for hosts_[index]
  // Agent liveness (cli/agent/liveness.h): every kHeartbeatInterval, a link silent for
  // agent_timeout_ fails with a message naming its host; its ranks end with that as the cause.
  void arm_watchdog();
  void check_liveness();

  boost::asio::io_context& io_;
  std::vector<HostSpec> hosts_;
  std::string local_guard_;
  std::map<int, Driven> remote_;
  std::optional<Driven> local_;  // this machine's agent, when a rank runs here
  std::chrono::milliseconds agent_timeout_;
  boost::asio::steady_timer watchdog_;
  std::chrono::steady_clock::time_point watchdog_planned_{};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace hora::cli
