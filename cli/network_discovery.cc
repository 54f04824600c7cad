#include "cli/network_discovery.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "cli/network_probe.h"
#include "ssh/format.h"

namespace hora::cli {
namespace {

constexpr const char* kFix =
    "give --network-interfaces (e.g. --network-interfaces eth0, or host=iface per host) to skip "
    "discovery";

// One probe command on one host: what it printed and how it ended.
struct Probe {
  std::shared_ptr<ssh::Channel> channel;
  std::string out;
  std::string err;
  std::optional<ssh::ExitInfo> exit;
};

std::string random_token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

Probe* start(ssh::Session& session, const std::string& command, std::unique_ptr<Probe>& slot) {
  slot = std::make_unique<Probe>();
  Probe* p = slot.get();
  ssh::Channel::Handlers h;
  h.on_stdout = [p](std::string_view d) { p->out.append(d); };
  h.on_stderr = [p](std::string_view d) { p->err.append(d); };
  h.on_exit = [p](const ssh::ExitInfo& e) { p->exit = e; };
  p->channel = session.exec(command, std::move(h));
  return p;
}

// Pumps every session until done() or the deadline; false on timeout. Waits on all the
// sessions' sockets at once, so the hosts' probes run in parallel.
bool pump_until(const std::vector<DiscoveryTarget>& hosts, ssh::Clock::time_point deadline,
                const std::function<bool()>& done) {
  for (const auto& h : hosts) h.session->pump();
  while (!done()) {
    const auto now = ssh::Clock::now();
    if (now >= deadline) return false;
    std::vector<pollfd> fds;
    bool again = false;
    for (const auto& h : hosts) {
      const auto in = h.session->interest();
      again = again || in.again;
      short ev = 0;
      if (in.read) ev |= POLLIN;
      if (in.write) ev |= POLLOUT;
      fds.push_back(pollfd{h.session->fd(), ev, 0});
    }
    // Rounded up so the wait never ends before the deadline it aims at.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    const int timeout = again ? 0 : static_cast<int>(std::min<long long>(left, 1000));
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      throw NetworkError(fmt::format("network discovery: poll failed: {}", std::strerror(errno)));
    }
    for (const auto& h : hosts) h.session->pump();
  }
  return true;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string failure(const std::string& host, const std::string& step, const Probe& p) {
  std::string why = p.exit ? p.exit->describe() : "did not finish";
  const std::string err = trimmed(p.err);
  if (!err.empty()) why += ": " + err;
  return fmt::format("{}: {} failed ({})", host, step, why);
}

}  // namespace

Reachability discover_reachability(const std::vector<DiscoveryTarget>& hosts,
                                   const std::string& horarun_path,
                                   ssh::Clock::time_point deadline) {
  const std::size_t n = hosts.size();
  const std::string bin = ssh::shell_quote(horarun_path);

  // 1. Listeners on every host; read up to "ready".
  std::vector<std::string> tokens(n);
  std::vector<std::unique_ptr<Probe>> listeners(n);
  for (std::size_t i = 0; i < n; ++i) {
    tokens[i] = random_token() + std::to_string(i);
    start(*hosts[i].session, bin + " --probe-listen " + tokens[i], listeners[i]);
  }
  auto close_listeners = [&] {
    for (auto& l : listeners) {
      if (l && !l->exit) l->channel->close();
    }
  };
  auto listening = [&] {
    return std::all_of(listeners.begin(), listeners.end(), [](const auto& l) {
      return l->exit.has_value() || listen_output_complete(l->out);
    });
  };
  if (!pump_until(hosts, deadline, listening)) {
    std::vector<std::string> late;
    for (std::size_t i = 0; i < n; ++i) {
      if (!listen_output_complete(listeners[i]->out)) late.push_back(hosts[i].name);
    }
    close_listeners();
    throw NetworkError(fmt::format(
        "network discovery: `horarun --probe-listen` did not report \"ready\" in time on {}; {}, "
        "or raise --start-timeout",
        fmt::join(late, ", "), kFix));
  }
  std::vector<std::vector<ProbeEndpoint>> endpoints(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!listen_output_complete(listeners[i]->out)) {
      close_listeners();
      throw NetworkError(fmt::format("network discovery: {}; {}",
                                     failure(hosts[i].name, "`horarun --probe-listen`", *listeners[i]),
                                     kFix));
    }
    try {
      endpoints[i] = parse_listen_output(listeners[i]->out, tokens[i], hosts[i].name);
    } catch (const Error& e) {
      close_listeners();
      throw NetworkError(fmt::format("network discovery: {}; {}", e.what(), kFix));
    }
  }

  // 2. Connect probes from every host to every other host's endpoints, all at once.
  // Their own timeout ends before the deadline, leaving room for the answers to come back over
  // SSH, so an unreachable address costs a "fail" in the reachability table, not the whole
  // discovery.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - ssh::Clock::now());
  const auto connect_timeout = std::clamp<std::chrono::milliseconds>(
      left - std::max<std::chrono::milliseconds>(left / 4, std::chrono::milliseconds(300)),
      std::chrono::milliseconds(100), kDefaultProbeTimeout);
  std::vector<std::unique_ptr<Probe>> connects(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string arg = connect_argument(connect_targets_for(i, endpoints));
    start(*hosts[i].session,
          fmt::format("{} --probe-connect {} --probe-timeout-ms {}", bin, ssh::shell_quote(arg),
                      connect_timeout.count()),
          connects[i]);
  }
  auto connected = [&] {
    return std::all_of(connects.begin(), connects.end(),
                       [](const auto& c) { return c->exit.has_value(); });
  };
  const bool in_time = pump_until(hosts, deadline, connected);
  std::vector<std::vector<ConnectOutcome>> outcomes(n);
  std::string error;
  for (std::size_t i = 0; i < n && error.empty(); ++i) {
    if (!connects[i]->exit) {
      connects[i]->channel->close();
      error = fmt::format("{}: `horarun --probe-connect` did not finish in time", hosts[i].name);
    } else if (!connects[i]->exit->ok()) {
      error = failure(hosts[i].name, "`horarun --probe-connect`", *connects[i]);
    } else {
      try {
        outcomes[i] = parse_connect_output(connects[i]->out, hosts[i].name);
      } catch (const Error& e) {
        error = e.what();
      }
    }
  }

  // 3. Close the listeners' stdin: they stop accepting and exit 0. Waiting for them is
  // bounded by the same deadline; a listener that lingers is closed with its channel.
  for (auto& l : listeners) {
    if (!l->exit) l->channel->close_stdin();
  }
  pump_until(hosts, deadline, [&] {
    return std::all_of(listeners.begin(), listeners.end(),
                       [](const auto& l) { return l->exit.has_value(); });
  });
  close_listeners();
  for (const auto& h : hosts) h.session->pump();

  if (!error.empty()) {
    throw NetworkError(fmt::format("network discovery: {}{}; {}", error,
                                   in_time ? "" : " (raise --start-timeout)", kFix));
  }
  return make_reachability(endpoints, outcomes);
}

}  // namespace hora::cli
