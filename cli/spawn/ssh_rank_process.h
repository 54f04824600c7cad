// Remote ranks: the guard (`<horarun> --guard`) runs on an SSH exec channel, one channel per
// rank, over sessions that the preflight connected (remote_hosts.h).
//
// Protocol: the channel runs `cd <cwd> && exec <horarun> --guard`; the GuardRequest (cwd, env
// block with the job secret, argv) goes on the channel's stdin, exactly as for local ranks, so
// nothing secret appears on the remote command line. stdin stays open for the whole job: a later
// `terminate\n` asks the guard to stop its rank, and EOF (channel closed, connection lost,
// horarun killed) makes the guard stop it too. The guard exits with its rank's status or
// re-raises its rank's signal, which sshd reports as exit-status / exit-signal.
//
// Threading: every Session is driven from the supervisor's io_context by one SessionDriver
// (the pattern documented in ssh/session.h): the driver waits on the session's socket for the
// session's interest and pumps it; channel handlers therefore run on the io_context thread, as
// RankProcess requires. Nothing here is thread-safe; nothing needs to be.
//
// Ownership: SshRankProcessFactory owns the drivers and, through them, the sessions; it must
// outlive every SshRankProcess it made (the launcher destroys the supervisor first). A process
// keeps a shared_ptr to its channel; destroying the process closes the channel.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cli/spawn/rank_process.h"
#include "ssh/session.h"

namespace hora::cli {

// Pumps one ssh::Session from an io_context (see ssh/session.h, "Driving a session from
// Boost.Asio"). kick() may be called at any time on the io_context thread, including from
// inside the session's handlers (the nested pump returns at once and a posted kick follows).
class SessionDriver {
 public:
  SessionDriver(boost::asio::io_context& io, std::unique_ptr<ssh::Session> session);
  ~SessionDriver();
  SessionDriver(const SessionDriver&) = delete;
  SessionDriver& operator=(const SessionDriver&) = delete;

  ssh::Session& session() { return *session_; }
  boost::asio::io_context& io() { return io_; }
  void kick();

 private:
  boost::asio::io_context& io_;
  std::unique_ptr<ssh::Session> session_;
  // Wraps session_->fd() without owning it (released in the destructor).
  boost::asio::posix::stream_descriptor sd_;
  bool read_armed_ = false;
  bool write_armed_ = false;
  bool posted_ = false;
  // Completion handlers hold a weak reference: the driver may go away with waits pending.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// ExitInfo (what sshd reported) as the supervisor's ExitStatus. A signal name ("KILL") becomes
// its number; a channel that failed (connection lost, closed by us) becomes exit code 255, as
// ssh(1) reports its own failures.
ExitStatus exit_status_from(const ssh::ExitInfo& info);

// `cd <cwd> && exec <horarun> --guard`, every part shell-quoted. An empty cwd omits the cd.
std::string guard_command(const std::string& cwd, const std::string& horarun_path);

class SshRankProcess : public RankProcess {
 public:
  // After kill(), how long the channel may take to close before the rank is reported lost.
  static constexpr std::chrono::milliseconds kKillAnswerTimeout{2000};

  SshRankProcess(int rank, std::string host, SessionDriver& driver, std::string horarun_path);
  ~SshRankProcess() override;

  void start(const GuardRequest& request, Events events) override;
  void terminate() override;
  // Closes the channel (the guard then stops its rank). When the connection is dead (a host
  // that dropped off the network never answers), the rank is reported as exited with 255 after
  // kKillAnswerTimeout, so the job ends instead of waiting for a host that is gone.
  void kill() override;
  void close_output() override;
  bool running() const override { return channel_ != nullptr && !exit_; }

 private:
  void finish(const ssh::ExitInfo& info);

  int rank_;
  std::string host_;
  SessionDriver& driver_;
  std::string horarun_path_;
  Events events_;
  std::shared_ptr<ssh::Channel> channel_;
  std::optional<ExitStatus> exit_;
  bool output_closed_ = false;
  std::unique_ptr<boost::asio::steady_timer> kill_timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// One remote host's connections: sshd allows MaxSessions (default 10) channels per connection,
// so a host with more ranks gets one session per kChannelsPerSession ranks.
struct RemoteHostSessions {
  static constexpr int kChannelsPerSession = 10;
  std::vector<std::unique_ptr<ssh::Session>> sessions;
};

// Makes SshRankProcess for the hosts in `remote` (by host index of the rank table) and
// LocalRankProcess for the others. `horarun_path` is the guard binary on the remote hosts,
// `local_guard` the one on this machine (this binary; tests give the built horarun).
class HybridRankProcessFactory : public RankProcessFactory {
 public:
  // `hosts`: the rank table's hosts; `remote`: sessions by index into `hosts`.
  HybridRankProcessFactory(boost::asio::io_context& io, std::vector<HostSpec> hosts,
                           std::map<int, RemoteHostSessions> remote, std::string horarun_path,
                           std::string local_guard = "/proc/self/exe");
  ~HybridRankProcessFactory() override;

  // `host` must be one of `hosts`; a remote host's ranks fill its sessions in order, at most
  // kChannelsPerSession each.
  std::unique_ptr<RankProcess> create(int rank, const HostSpec& host) override;

 private:
  boost::asio::io_context& io_;
  std::vector<HostSpec> hosts_;
  std::string horarun_path_;
  std::string local_guard_;
  std::map<int, std::vector<std::unique_ptr<SessionDriver>>> drivers_;
  std::map<int, int> created_;  // ranks created so far per remote host index
};

}  // namespace hora::cli
