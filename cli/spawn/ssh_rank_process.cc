#include "cli/spawn/ssh_rank_process.h"

#include <signal.h>
#include <string.h>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "cli/errors.h"
#include "cli/output/log.h"
#include "cli/spawn/local_rank_process.h"
#include "ssh/format.h"

namespace hora::cli {
namespace {

namespace asio = boost::asio;

// "TERM" -> SIGTERM; 0 when the name is unknown. sshd sends the name without "SIG" (RFC 4254
// 6.10); some servers add it, so both are accepted.
int signal_number(std::string name) {
  if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    if (abbrev != nullptr && name == abbrev) return sig;
  }
  return 0;
}

// The exit code ssh(1) uses for its own failures.
constexpr int kChannelFailureCode = 255;

}  // namespace

// ---- SessionDriver -------------------------------------------------------------------------

SessionDriver::SessionDriver(asio::io_context& io, std::unique_ptr<ssh::Session> session)
    : io_(io), session_(std::move(session)), sd_(io, session_->fd()) {}

SessionDriver::~SessionDriver() {
  *alive_ = false;
  boost::system::error_code ignored;
  sd_.cancel(ignored);
  sd_.release();  // the session owns and closes the socket
}

void SessionDriver::kick() {
  session_->pump();
  const ssh::Session::Interest want = session_->interest();
  std::weak_ptr<bool> alive = alive_;
  if (want.again && !posted_) {
    posted_ = true;
    asio::post(io_, [this, alive] {
      if (alive.expired()) return;
      posted_ = false;
      kick();
    });
  }
  // One wait per direction at a time; its completion pumps again.
  auto arm = [&](bool& armed, asio::posix::stream_descriptor::wait_type what) {
    if (armed) return;
    armed = true;
    sd_.async_wait(what, [this, alive, &armed](const boost::system::error_code& ec) {
      if (alive.expired()) return;
      armed = false;
      if (!ec) kick();
    });
  };
  if (want.read) arm(read_armed_, asio::posix::stream_descriptor::wait_read);
  if (want.write) arm(write_armed_, asio::posix::stream_descriptor::wait_write);
}

// ---- helpers -------------------------------------------------------------------------------

ExitStatus exit_status_from(const ssh::ExitInfo& info) {
  ExitStatus st;
  if (!info.error.empty()) {
    st.code = kChannelFailureCode;
  } else if (!info.exit_signal.empty()) {
    const int sig = signal_number(info.exit_signal);
    if (sig != 0) {
      st.signaled = true;
      st.signal = sig;
    } else {
      st.code = kChannelFailureCode;  // a signal this system has no name for
    }
  } else {
    st.code = info.exit_status >= 0 ? info.exit_status : kChannelFailureCode;
  }
  return st;
}

std::string guard_command(const std::string& cwd, const std::string& horarun_path) {
  const std::string exec = fmt::format("exec {} --guard", ssh::shell_quote(horarun_path));
  if (cwd.empty()) return exec;
  return fmt::format("cd {} && {}", ssh::shell_quote(cwd), exec);
}

// ---- SshRankProcess ------------------------------------------------------------------------

SshRankProcess::SshRankProcess(int rank, std::string host, SessionDriver& driver,
                               std::string horarun_path)
    : rank_(rank),
      host_(std::move(host)),
      driver_(driver),
      horarun_path_(std::move(horarun_path)) {}

SshRankProcess::~SshRankProcess() {
  *alive_ = false;
  if (channel_ && !channel_->done()) {
    // The supervisor waits for every rank; this path is for exceptions. Closing the channel
    // closes the guard's stdin, and the guard stops its rank.
    channel_->close();
    driver_.kick();
  }
}

void SshRankProcess::start(const GuardRequest& request, Events events) {
  events_ = std::move(events);
  const std::string block = request.encode();
  ssh::Channel::Handlers h;
  std::weak_ptr<bool> alive = alive_;
  h.on_stdout = [this, alive](std::string_view data) {
    if (!alive.expired() && !output_closed_ && events_.on_output)
      events_.on_output(Stream::kStdout, data);
  };
  h.on_stderr = [this, alive](std::string_view data) {
    if (!alive.expired() && !output_closed_ && events_.on_output)
      events_.on_output(Stream::kStderr, data);
  };
  h.on_exit = [this, alive](const ssh::ExitInfo& info) {
    if (!alive.expired()) finish(info);
  };
  if (!driver_.session().error().empty()) {
    throw SpawnError(fmt::format("rank {} on {}: {}", rank_, host_, driver_.session().error()));
  }
  // The command line carries only paths; the request (environment, secret) goes on stdin.
  channel_ = driver_.session().exec(guard_command(request.cwd, horarun_path_), std::move(h));
  channel_->write(block);
  driver_.kick();
}

void SshRankProcess::finish(const ssh::ExitInfo& info) {
  if (exit_) return;
  exit_ = exit_status_from(info);
  if (!info.error.empty()) {
    // The supervisor reports "exited with code 255"; this says why.
    launcher_log()->error("rank {} on {}: {}", rank_, host_, info.error);
  }
  // sshd sends the command's output before its exit status, so both streams are complete.
  if (!output_closed_) {
    output_closed_ = true;
    if (events_.on_output_closed) {
      events_.on_output_closed(Stream::kStdout);
      events_.on_output_closed(Stream::kStderr);
    }
  }
  if (events_.on_exit) events_.on_exit(*exit_);
}

void SshRankProcess::terminate() {
  if (!running()) return;
  channel_->write(GuardRequest::kTerminate);
  driver_.kick();
}

void SshRankProcess::kill() {
  // No way to signal a remote process directly: closing the channel closes the guard's stdin
  // (and sshd's session process exits, sending the guard PR_SET_PDEATHSIG), so the guard kills
  // its rank's process group.
  if (!running()) return;
  channel_->close();
  driver_.kick();
  if (kill_timer_) return;
  kill_timer_ = std::make_unique<asio::steady_timer>(driver_.io(), kKillAnswerTimeout);
  std::weak_ptr<bool> alive = alive_;
  kill_timer_->async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired() || exit_) return;
    ssh::ExitInfo lost;
    lost.error = fmt::format(
        "no answer over SSH {} ms after closing the rank's channel; the connection to {} is "
        "probably lost (the rank there is stopped when sshd notices)",
        kKillAnswerTimeout.count(), host_);
    finish(lost);
  });
}

void SshRankProcess::close_output() {
  // Output ends with the channel (finish()); nothing is left to stop reading.
}

// ---- HybridRankProcessFactory --------------------------------------------------------------

HybridRankProcessFactory::HybridRankProcessFactory(asio::io_context& io,
                                                   std::vector<HostSpec> hosts,
                                                   std::map<int, RemoteHostSessions> remote,
                                                   std::string horarun_path,
                                                   std::string local_guard)
    : io_(io),
      hosts_(std::move(hosts)),
      horarun_path_(std::move(horarun_path)),
      local_guard_(std::move(local_guard)) {
  for (auto& [index, host] : remote) {
    auto& drivers = drivers_[index];
    for (auto& session : host.sessions) {
      drivers.push_back(std::make_unique<SessionDriver>(io_, std::move(session)));
    }
  }
}

HybridRankProcessFactory::~HybridRankProcessFactory() = default;

std::unique_ptr<RankProcess> HybridRankProcessFactory::create(int rank, const HostSpec& host) {
  int index = -1;
  for (std::size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i] == host) {
      index = static_cast<int>(i);
      break;
    }
  }
  auto it = drivers_.find(index);
  if (it == drivers_.end()) {
    return std::make_unique<LocalRankProcess>(io_, rank, host.name, local_guard_);
  }
  const int n = created_[index]++;
  const auto slot = static_cast<std::size_t>(n / RemoteHostSessions::kChannelsPerSession);
  if (slot >= it->second.size()) {
    throw SpawnError(
        fmt::format("rank {} on {}: no SSH session left for it ({} connected, {} "
                    "ranks each); this is a horarun bug",
                    rank, host.address_for_display(), it->second.size(),
                    RemoteHostSessions::kChannelsPerSession));
  }
  return std::make_unique<SshRankProcess>(rank, host.address_for_display(), *it->second[slot],
                                          horarun_path_);
}

}  // namespace hora::cli
