// Remote ranks: the guard (`<horarun> --guard`) runs as a child of the host's agent
// (cli/agent/), which the preflight started over the host's one SSH exec channel. No new channel
// and no login shell per rank.
//
// Protocol: the agent starts `<horarun> --guard` in the rank's working directory; the GuardRequest
// (cwd, env block with the job secret, argv) goes on the guard's stdin through the agent, exactly
// as for local ranks, so nothing secret appears on any command line. stdin stays open for the
// whole job: a later `terminate\n` asks the guard to stop its rank, and EOF (channel closed,
// connection lost, horarun or the agent killed) makes the guard stop it too. The guard exits with
// its rank's status or re-raises its rank's signal, which the agent reports in its EXIT frame.
//
// Threading: every host's agent stream is driven from the supervisor's io_context by one
// StreamDriver; the agent's handlers therefore run on the io_context thread, as RankProcess
// requires. Nothing here is thread-safe; nothing needs to be.
//
// Ownership: HybridRankProcessFactory owns the remote hosts (sessions and agents) and the
// drivers; it must outlive every RemoteRankProcess it made (the launcher destroys the supervisor
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
#include "cli/hosts/remote_hosts.h"
#include "cli/spawn/rank_process.h"
#include "cli/spawn/stream_driver.h"
#include "ssh/session.h"

namespace hora::cli {

// ExitInfo (what the agent or sshd reported) as the supervisor's ExitStatus. A signal name
// ("KILL") becomes its number; a channel that failed (connection lost, closed by us) becomes exit
// code 255, as ssh(1) reports its own failures.
ExitStatus exit_status_from(const ssh::ExitInfo& info);

class RemoteRankProcess : public RankProcess {
 public:
  // After kill(), how long the agent may take to answer before the rank is reported lost.
  static constexpr std::chrono::milliseconds kKillAnswerTimeout{2000};

  // `link`: how the agent is reached, for messages ("SSH connection", "srun step").
  RemoteRankProcess(int rank, std::string host, StreamDriver& driver, agent::AgentLink& agent,
                    std::string link = "SSH connection");
  ~RemoteRankProcess() override;

  void start(const GuardRequest& request, Events events) override;
  void terminate() override;
  // Closes the guard's channel (the guard then stops its rank). When the connection is dead (a
  // host that dropped off the network never answers), the rank is reported as exited with 255
  // after kKillAnswerTimeout, so the job ends instead of waiting for a host that is gone.
  void kill() override;
  void close_output() override;
  bool running() const override { return channel_ != nullptr && !exit_; }

 private:
  void finish(const ssh::ExitInfo& info);

  int rank_;
  std::string host_;
  std::string link_;
  StreamDriver& driver_;
  agent::AgentLink& agent_;
  Events events_;
  std::shared_ptr<agent::AgentChannel> channel_;
  std::optional<ExitStatus> exit_;
  bool output_closed_ = false;
  std::unique_ptr<boost::asio::steady_timer> kill_timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Makes RemoteRankProcess for the hosts in `remote` (by host index of the rank table) and
// LocalRankProcess for the others. `local_guard` is the guard binary on this machine (this
// binary; tests give the built horarun).
class HybridRankProcessFactory : public RankProcessFactory {
 public:
  // `hosts`: the rank table's hosts; `remote`: the preflight's hosts by index into `hosts`.
  HybridRankProcessFactory(boost::asio::io_context& io, std::vector<HostSpec> hosts,
                           std::map<int, RemoteHost> remote,
                           std::string local_guard = "/proc/self/exe");
  ~HybridRankProcessFactory() override;

  std::unique_ptr<RankProcess> create(int rank, const HostSpec& host) override;

 private:
  // Destroyed driver first, then host (reverse declaration order): the driver stops before
  // the stream it drives, and the host's agent before its session.
  struct Driven {
    RemoteHost host;
    std::unique_ptr<StreamDriver> driver;
  };
  boost::asio::io_context& io_;
  std::vector<HostSpec> hosts_;
  std::string local_guard_;
  std::map<int, Driven> remote_;
};

}  // namespace hora::cli
