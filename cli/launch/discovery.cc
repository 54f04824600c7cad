#include "cli/launch/discovery.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "cli/agent/stream_poll.h"
#include "cli/network/probe.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "ssh/format.h"

namespace hora::cli {
namespace {

constexpr const char* kFix =
    "give --network-interfaces (e.g. --network-interfaces eth0, or host=iface per host) to skip "
    "discovery";

// One probe command on one remote host: what it printed and how it ended.
struct Probe {
  std::shared_ptr<agent::AgentChannel> channel;
  std::string out;
  std::string err;
  std::optional<ssh::ExitInfo> exit;
};

// The probes of this machine when it is one of the hosts: the listener serves on its own thread
// until the write end of `stop` closes; the connect probe runs on another (std::async). Both end
// by the discovery's deadline at the latest. Destroying it stops and joins the listener.
struct LocalProbe {
  std::unique_ptr<ProbeListener> listener;
  UniqueFd stop_read, stop_write;
  std::thread server;
  std::future<std::vector<ConnectOutcome>> connect;

  void start(const std::string& token, ssh::Clock::time_point deadline) {
    listener = std::make_unique<ProbeListener>(token);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw NetworkError(fmt::format("network discovery: pipe: {}", std::strerror(errno)));
    }
    stop_read.reset(fds[0]);
    stop_write.reset(fds[1]);
    // A little past the deadline: stop() is what normally ends it.
    const auto until = deadline + std::chrono::seconds(1);
    server = std::thread([this, until] {
      std::string ignored;
      (void)listener->serve(stop_read.get(), until, ignored);
    });
  }
  void stop() {
    stop_write.reset();
    if (server.joinable()) server.join();
  }
  bool connect_done() const {
    return connect.valid() &&
           connect.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  ~LocalProbe() {
    stop();
    if (connect.valid()) connect.wait();
  }
};

std::string random_token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

// Starts `horarun ARGS` on a remote host through its agent.
Probe* start(agent::AgentLink& agent, const std::vector<std::string>& args,
             std::unique_ptr<Probe>& slot) {
  slot = std::make_unique<Probe>();
  Probe* p = slot.get();
  agent::AgentChannel::Handlers h;
  h.on_stdout = [p](std::string_view d) { p->out.append(d); };
  h.on_stderr = [p](std::string_view d) { p->err.append(d); };
  h.on_exit = [p](const ssh::ExitInfo& e) { p->exit = e; };
  p->channel = agent.exec("", args, std::move(h));
  return p;
}

// Every remote host's agent stream (this machine's entry has none).
std::vector<agent::Stream*> streams_of(const std::vector<DiscoveryTarget>& hosts) {
  std::vector<agent::Stream*> out;
  for (const auto& h : hosts) {
    if (h.agent != nullptr) out.push_back(&h.agent->stream());
  }
  return out;
}

void pump_all(const std::vector<DiscoveryTarget>& hosts) { agent::pump_streams(streams_of(hosts)); }

// Pumps every remote agent stream until done() or the deadline; false on timeout. Waits on all
// the streams' descriptors at once, so the hosts' probes run in parallel. `local_busy` says whether
// an in-process probe may finish meanwhile (it cannot wake poll(), so poll wakes every 10 ms then).
bool pump_until(const std::vector<DiscoveryTarget>& hosts, ssh::Clock::time_point deadline,
                const std::function<bool()>& done, bool local_busy = false) {
  try {
    return agent::pump_streams_until(streams_of(hosts), deadline, done,
                                     std::chrono::milliseconds(local_busy ? 10 : 1000));
  } catch (const std::system_error& e) {
    throw NetworkError(fmt::format("network discovery: {}", e.what()));
  }
}

std::string failure(const std::string& host, const std::string& step, const Probe& p) {
  std::string why = p.exit ? p.exit->describe() : "did not finish";
  const std::string err(trim_end(p.err));
  if (!err.empty()) why += ": " + err;
  return fmt::format("{}: {} failed ({})", host, step, why);
}

// discover_reachability's steps, over the probes they share.
class ReachabilityProbe {
 public:
  ReachabilityProbe(const std::vector<DiscoveryTarget>& hosts, ssh::Clock::time_point deadline)
      : hosts_(hosts),
        deadline_(deadline),
        n_(hosts.size()),
        tokens_(n_),
        listeners_(n_),
        locals_(n_),
        connects_(n_),
        outcomes_(n_) {}

  Reachability run() {
    start_listeners();
    const std::vector<std::vector<ProbeEndpoint>> endpoints = wait_for_listeners();
    start_connects(endpoints);
    const bool in_time = pump_until(
        hosts_, deadline_, [this] { return connected(); }, any_local_);
    const std::string error = collect_outcomes();
    stop_listeners();
    if (!error.empty()) {
      throw NetworkError(fmt::format("network discovery: {}{}; {}", error,
                                     in_time ? "" : " (raise --start-timeout)", kFix));
    }
    return make_reachability(endpoints, outcomes_);
  }

 private:
  bool is_local(std::size_t i) const { return hosts_[i].agent == nullptr; }

  void close_listeners() {
    for (auto& l : listeners_) {
      if (l && !l->exit) l->channel->close();
    }
  }

  const std::string& listen_output(std::size_t i) const {
    return is_local(i) ? locals_[i]->listener->report() : listeners_[i]->out;
  }

  // 1. Listeners on every host; read up to "ready". This machine's listen at once, in-process.
  void start_listeners() {
    for (std::size_t i = 0; i < n_; ++i) {
      tokens_[i] = random_token() + std::to_string(i);
      if (is_local(i)) {
        locals_[i] = std::make_unique<LocalProbe>();
        locals_[i]->start(tokens_[i], deadline_);
      } else {
        start(*hosts_[i].agent, {"--probe-listen", tokens_[i]}, listeners_[i]);
      }
    }
  }

  std::vector<std::vector<ProbeEndpoint>> wait_for_listeners() {
    auto listening = [&] {
      for (std::size_t i = 0; i < n_; ++i) {
        if (is_local(i)) continue;
        if (!listeners_[i]->exit && !listen_output_complete(listeners_[i]->out)) return false;
      }
      return true;
    };
    if (!pump_until(hosts_, deadline_, listening)) {
      std::vector<std::string> late;
      for (std::size_t i = 0; i < n_; ++i) {
        if (!listen_output_complete(listen_output(i))) late.push_back(hosts_[i].name);
      }
      close_listeners();
      throw NetworkError(fmt::format(
          "network discovery: `horarun --probe-listen` did not report \"ready\" in time on {}; "
          "{}, or raise --start-timeout",
          fmt::join(late, ", "), kFix));
    }
    std::vector<std::vector<ProbeEndpoint>> endpoints(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      if (!listen_output_complete(listen_output(i))) {
        close_listeners();
        throw NetworkError(
            fmt::format("network discovery: {}; {}",
                        failure(hosts_[i].name, "`horarun --probe-listen`", *listeners_[i]), kFix));
      }
      try {
        endpoints[i] = parse_listen_output(listen_output(i), tokens_[i], hosts_[i].name);
      } catch (const Error& e) {
        close_listeners();
        throw NetworkError(fmt::format("network discovery: {}; {}", e.what(), kFix));
      }
    }
    return endpoints;
  }

  // 2. Connect probes from every host to every other host's endpoints, all at once.
  // Their own timeout ends before the deadline, leaving room for the answers to come back over
  // SSH, so an unreachable address costs a "fail" in the reachability table, not the whole
  // discovery.
  void start_connects(const std::vector<std::vector<ProbeEndpoint>>& endpoints) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - ssh::Clock::now());
    const auto connect_timeout = std::clamp<std::chrono::milliseconds>(
        left - std::max<std::chrono::milliseconds>(left / 4, std::chrono::milliseconds(300)),
        std::chrono::milliseconds(100), kDefaultProbeTimeout);
    for (std::size_t i = 0; i < n_; ++i) {
      const std::vector<ProbeEndpoint> targets = connect_targets_for(i, endpoints);
      if (is_local(i)) {
        any_local_ = true;
        std::vector<std::string> list;
        for (const ProbeEndpoint& e : targets) list.push_back(e.target());
        locals_[i]->connect =
            std::async(std::launch::async, [list = std::move(list), connect_timeout] {
              return probe_connect(list, connect_timeout);
            });
        continue;
      }
      start(*hosts_[i].agent,
            {"--probe-connect", connect_argument(targets), "--probe-timeout-ms",
             std::to_string(connect_timeout.count())},
            connects_[i]);
    }
  }

  bool connected() const {
    for (std::size_t i = 0; i < n_; ++i) {
      if (is_local(i) ? !locals_[i]->connect_done() : !connects_[i]->exit.has_value()) {
        return false;
      }
    }
    return true;
  }

  // Every host's connect results; the first failure, or empty.
  std::string collect_outcomes() {
    for (std::size_t i = 0; i < n_; ++i) {
      if (is_local(i)) {
        // probe_connect ends at connect_timeout, well before the deadline; a result that is
        // not there yet is waited for (bounded by that timeout) rather than abandoned.
        outcomes_[i] = locals_[i]->connect.get();
        continue;
      }
      if (!connects_[i]->exit) {
        connects_[i]->channel->close();
        return fmt::format("{}: `horarun --probe-connect` did not finish in time", hosts_[i].name);
      }
      if (!connects_[i]->exit->ok()) {
        return failure(hosts_[i].name, "`horarun --probe-connect`", *connects_[i]);
      }
      try {
        outcomes_[i] = parse_connect_output(connects_[i]->out, hosts_[i].name);
      } catch (const Error& e) {
        return e.what();
      }
    }
    return {};
  }

  // 3. Close the listeners' stdin: they stop accepting and exit 0. Waiting for them is
  // bounded by the same deadline; a listener that lingers is closed with its channel.
  void stop_listeners() {
    for (auto& l : locals_) {
      if (l) l->stop();
    }
    for (auto& l : listeners_) {
      if (l && !l->exit) l->channel->close_stdin();
    }
    pump_until(hosts_, deadline_, [&] {
      return std::all_of(listeners_.begin(), listeners_.end(),
                         [](const auto& l) { return !l || l->exit.has_value(); });
    });
    close_listeners();
    pump_all(hosts_);
  }

  const std::vector<DiscoveryTarget>& hosts_;
  const ssh::Clock::time_point deadline_;
  const std::size_t n_;
  std::vector<std::string> tokens_;
  std::vector<std::unique_ptr<Probe>> listeners_;
  std::vector<std::unique_ptr<LocalProbe>> locals_;
  std::vector<std::unique_ptr<Probe>> connects_;
  std::vector<std::vector<ConnectOutcome>> outcomes_;
  bool any_local_ = false;
};

}  // namespace

Reachability discover_reachability(const std::vector<DiscoveryTarget>& hosts,
                                   ssh::Clock::time_point deadline) {
  return ReachabilityProbe(hosts, deadline).run();
}

}  // namespace hora::cli
