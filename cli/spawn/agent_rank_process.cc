#include "cli/spawn/agent_rank_process.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "cli/agent/liveness.h"
#include "cli/agent/pipe_stream.h"
#include "cli/base/errors.h"
#include "cli/output/log.h"
#include "common/duration.h"
#include "common/text.h"
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

// ---- AgentRankProcess ---------------------------------------------------------------------

AgentRankProcess::AgentRankProcess(int rank, std::string host, StreamDriver& driver,
                                   agent::AgentLink& agent, std::string link, bool local)
    : rank_(rank),
      host_(std::move(host)),
      link_(std::move(link)),
      local_(local),
      driver_(driver),
      agent_(agent) {}

AgentRankProcess::~AgentRankProcess() {
  *alive_ = false;
  if (channel_ && !channel_->done()) {
    // The supervisor waits for every rank; this path is for exceptions. Closing the channel
    // closes the guard's stdin, and the guard stops its rank.
    channel_->close();
    driver_.kick();
  }
}

void AgentRankProcess::start(const GuardRequest& request, Events events) {
  events_ = std::move(events);
  agent::AgentChannel::Handlers h;
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
  if (agent_.closed()) {
    throw SpawnError(fmt::format("{}: {}", rank_name(rank_, host_), agent_.error()));
  }
  // The arguments carry nothing but the mode; the request (environment, secret, working
  // directory) goes on stdin. The guard enters the directory itself, so a missing one is reported
  // in its words ("must exist on every host") on every host alike.
  channel_ = agent_.exec("", {"--guard"}, std::move(h));
  channel_->write(request.encode());
  driver_.kick();
}

void AgentRankProcess::finish(const ssh::ExitInfo& info) {
  if (exit_) return;
  exit_ = exit_status_from(info);
  // The agent ending (a signal, killed, silent) decided this rank's end, whatever the guard said.
  exit_->agent_failure = agent_.failure();
  if (!info.error.empty()) {
    // The supervisor reports "exited with code 255"; this says why.
    launcher_log()->error("{}: {}", rank_name(rank_, host_), info.error);
  }
  // The agent sends a child's output before its EXIT, so both streams are complete.
  if (!output_closed_) {
    output_closed_ = true;
    if (events_.on_output_closed) {
      events_.on_output_closed(Stream::kStdout);
      events_.on_output_closed(Stream::kStderr);
    }
  }
  if (events_.on_exit) events_.on_exit(*exit_);
}

void AgentRankProcess::terminate() {
  if (!running()) return;
  channel_->write(GuardRequest::kTerminate);
  driver_.kick();
}

void AgentRankProcess::kill() {
  // No way to signal a remote process directly: closing the channel makes the agent close the
  // guard's stdin, so the guard kills its rank's process group.
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
        "no answer from the agent on {1} {0} ms after closing the rank's channel; the {2} to {1} "
        "is probably lost (the agent stops the rank there when it notices)",
        kKillAnswerTimeout.count(), host_, link_);
    finish(lost);
  });
}

void AgentRankProcess::close_output() {
  // Output ends with the channel (finish()); nothing is left to stop reading.
}

// ---- AgentRankProcessFactory ---------------------------------------------------------------

AgentRankProcessFactory::AgentRankProcessFactory(asio::io_context& io, std::vector<HostSpec> hosts,
                                                 std::map<int, RemoteHost> remote,
                                                 std::string local_guard)
    : io_(io),
      hosts_(std::move(hosts)),
      local_guard_(std::move(local_guard)),
      agent_timeout_(agent::agent_timeout_from(std::getenv(agent::kAgentTimeoutVariable))),
      watchdog_(io) {
  arm_watchdog();
  for (auto& [index, host] : remote) {
    Driven& d = remote_[index];
    d.host = std::move(host);
    drive(d);
  }
  int local_index = -1;
  for (std::size_t i = 0; i < hosts_.size(); ++i) {
    if (remote_.count(static_cast<int>(i)) == 0) local_index = static_cast<int>(i);
  }
  if (local_index < 0) return;
  start_local(local_index);
}

void AgentRankProcessFactory::start_local(int index) {
  // This machine's ranks go through an agent of their own, as every other host's do.
  const std::string name = hosts_[static_cast<std::size_t>(index)].name;
  auto stream = std::make_unique<agent::PipeStream>(std::vector<std::string>{"horarun", "--agent",
                                                                             "--report-pids"},
                                                    local_guard_);
  const agent::PipeStream::Started st =
      stream->start(agent::PipeStream::Clock::now() + kLocalAgentStart);
  if (!st.ready) {
    throw SpawnError(fmt::format("cannot start the agent for this machine's ranks ({} --agent): {}",
                                 local_guard_, st.failure));
  }
  local_.emplace();
  local_->host.index = index;
  local_->host.target.alias = name;
  local_->host.agent = agent::link_over_pipe(name, std::move(stream));
  drive(*local_);
}

void AgentRankProcessFactory::add_remote(const HostSpec& host, RemoteHost remote) {
  hosts_.push_back(host);
  Driven& d = remote_[static_cast<int>(hosts_.size()) - 1];
  d.host = std::move(remote);
  drive(d);
}

void AgentRankProcessFactory::add_local(const HostSpec& host) {
  if (local_) {
    hosts_[static_cast<std::size_t>(local_->host.index)] = host;
    return;
  }
  hosts_.push_back(host);
  start_local(static_cast<int>(hosts_.size()) - 1);
}

std::map<std::string, std::string> AgentRankProcessFactory::lost_hosts() const {
  std::map<std::string, std::string> lost;
  for (const auto& [index, d] : remote_) {
    if (d.host.agent && d.host.agent->closed()) {
      lost.emplace(hosts_.at(static_cast<std::size_t>(index)).address_for_display(),
                   d.host.agent->error());
    }
  }
  if (local_ && local_->host.agent && local_->host.agent->closed()) {
    lost.emplace(hosts_.at(static_cast<std::size_t>(local_->host.index)).address_for_display(),
                 local_->host.agent->error());
  }
  return lost;
}

void AgentRankProcessFactory::arm_watchdog() {
  watchdog_planned_ = std::chrono::steady_clock::now() + agent::kHeartbeatInterval;
  watchdog_.expires_at(watchdog_planned_);
  std::weak_ptr<bool> alive = alive_;
  watchdog_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    check_liveness();
    arm_watchdog();
  });
}

void AgentRankProcessFactory::check_liveness() {
  const auto now = agent::Liveness::Clock::now();
  std::vector<Driven*> all;
  for (auto& [index, d] : remote_) all.push_back(&d);
  if (local_) all.push_back(&*local_);
  // A late tick (horarun stopped, or its loop busy with output) forgives nobody by itself: a link
  // is judged only after reading what already arrived on it (the pump below).
  std::map<std::string, agent::AgentLink*> by_alias;
  for (Driven* d : all) {
    if (d->host.agent) by_alias.emplace(d->host.target.alias, d->host.agent.get());
  }
  // Relaying hosts first: their failure takes their relayed hosts with it, naming them.
  std::stable_sort(all.begin(), all.end(), [](const Driven* a, const Driven* b) {
    return a->host.relay_parent.empty() && !b->host.relay_parent.empty();
  });
  for (Driven* d : all) {
    agent::AgentLink* link = d->host.agent.get();
    if (link == nullptr || link->closed() || !link->liveness().expired(now, agent_timeout_)) {
      continue;
    }
    agent::AgentLink* parent = nullptr;
    if (!d->host.relay_parent.empty()) {
      const auto p = by_alias.find(d->host.relay_parent);
      if (p != by_alias.end()) parent = p->second;
    }
    // What already arrived counts (the loop, busy with output, may not have read it yet).
    (parent != nullptr ? parent : link)->stream().pump();
    const auto later = agent::Liveness::Clock::now();
    if (link->closed() || !link->liveness().expired(later, agent_timeout_)) continue;
    if (parent != nullptr &&
        (parent->closed() || !agent::relayed_silence_is_own(link->liveness(), parent->liveness(),
                                                            later, agent_timeout_))) {
      continue;  // the relaying host is the silent one: its own timeout names it
    }
    const auto silent =
        std::chrono::duration_cast<std::chrono::milliseconds>(link->liveness().silent(now));
    const std::string pid =
        link->agent_pid() != 0 ? fmt::format(" (pid {})", link->agent_pid()) : std::string();
    link->fail(fmt::format(
        "the agent on {}{} stopped answering: nothing came from it for {} (it sends a heartbeat "
        "every {}); it is stopped (SIGSTOP), hung, or its host is unreachable over the {} "
        "(the bound is {}={})",
        d->host.describe(), pid, hora::format_duration(silent),
        hora::format_duration(agent::kHeartbeatInterval), d->host.carrier(),
        agent::kAgentTimeoutVariable,
        fmt::format("{:g}", std::chrono::duration<double>(agent_timeout_).count())));
    // A stopped agent reads neither the close nor its stdin's EOF: kill it (its guards end their
    // ranks, and the agents it relayed end with its connections), so nothing stays on its host.
    if (link->agent_pid() != 0) {
      const std::string why =
          link->stream().kill_agent(link->agent_pid(),
                                    agent::Liveness::Clock::now() + agent::kAgentKillTimeout);
      if (!why.empty()) {
        launcher_log()->warn(
            "could not kill the silent agent on {} (pid {}), it may be left there: {}",
            d->host.describe(), link->agent_pid(), why);
      } else {
        launcher_log()->debug("killed the silent agent on {} (pid {})", d->host.describe(),
                              link->agent_pid());
      }
    }
  }
}

void AgentRankProcessFactory::drive(Driven& d) {
  d.driver = std::make_unique<StreamDriver>(io_, d.host.agent->stream());
  d.host.agent->set_defer([&io = io_](std::function<void()> f) { asio::post(io, std::move(f)); });
  // Whatever the agent sent while nobody pumped (nothing, normally) is taken now.
  d.driver->kick();
}

// Each Driven's driver goes before its host (declaration order): drivers stop before the
// streams they drive, and the agents end with their channels before the sessions close.
AgentRankProcessFactory::~AgentRankProcessFactory() = default;

std::unique_ptr<RankProcess> AgentRankProcessFactory::create(int rank, const HostSpec& host) {
  int index = -1;
  for (std::size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i] == host) {
      index = static_cast<int>(i);
      break;
    }
  }
  // Elastic jobs name a host by its name (its slots may be another round's).
  for (std::size_t i = 0; index < 0 && i < hosts_.size(); ++i) {
    if (hosts_[i].name == host.name && hosts_[i].user == host.user) index = static_cast<int>(i);
  }
  if (auto it = remote_.find(index); it != remote_.end()) {
    return std::make_unique<AgentRankProcess>(rank, host.address_for_display(), *it->second.driver,
                                              *it->second.host.agent, it->second.host.carrier());
  }
  if (!local_ || local_->host.index != index) {
    throw SpawnError(
        fmt::format("rank {}: host {} is neither this machine nor a prepared remote "
                    "host; this is a horarun bug",
                    rank, host.address_for_display()));
  }
  return std::make_unique<AgentRankProcess>(rank, host.name, *local_->driver, *local_->host.agent,
                                            "local agent", true);
}

}  // namespace hora::cli
