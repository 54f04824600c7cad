#include "cli/remote/remote_hosts.h"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "cli/agent/agent.h"
#include "cli/agent/relay_stream.h"
#include "cli/agent/stream_poll.h"
#include "cli/network/source_address.h"
#include "cli/output/log.h"
#include "common/duration.h"
#include "common/endpoint.h"
#include "ssh/errors.h"
#include "ssh/format.h"
#include "ssh/preflight.h"

namespace hora::cli {
namespace {

constexpr std::string_view kProbeTag = "HORA-PROBE ";

}  // namespace

bool has_probe_line(const std::string& out) { return out.rfind(kProbeTag, 0) == 0; }

std::string judge_probe(const ssh::RunResult& run, bool started, const std::string& horarun_path,
                        const std::string& where) {
  const std::string first = run.out.substr(0, run.out.find('\n'));
  if (!has_probe_line(first)) {
    std::string err = run.err.substr(0, 200);
    while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
    return fmt::format(
        "{}: the probe command printed no result (exit status {}, stderr: '{}'); "
        "the remote user's login shell must be a POSIX shell that runs commands "
        "(check the user: user@host, User in ssh_config)",
        where, run.exit_status, err);
  }
  const std::string state = first.substr(kProbeTag.size());
  if (state == "missing") {
    return fmt::format(
        "{}: horarun is not installed at {} there; install hora at the same path "
        "on every host, or give its path there with --horarun-path",
        where, horarun_path);
  }
  if (state == "not-executable") {
    return fmt::format(
        "{}: {} exists there but is not executable by the remote user; fix its "
        "permissions or give another path with --horarun-path",
        where, horarun_path);
  }
  if (state != "ok") return fmt::format("{}: unexpected probe result '{}'", where, state);
  if (!started) {
    std::string err = run.err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    return fmt::format(
        "{}: `{} --agent` ended before it was ready (exit status {}{}{}); the remote horarun "
        "may be an older build: install the same hora on every host",
        where, horarun_path, run.exit_status, err.empty() ? "" : ": ", err.substr(0, 300));
  }
  return {};
}

std::string probe_command(const std::string& horarun_path, const std::string& command_snippet) {
  const std::string p = ssh::shell_quote(horarun_path);
  std::string cmd = fmt::format(
      "if [ ! -e {0} ]; then echo '{1}missing'; elif [ ! -x {0} ] || [ -d {0} ]; then "
      "echo '{1}not-executable'; else echo '{1}ok'",
      p, kProbeTag);
  if (!command_snippet.empty()) cmd += "; " + command_snippet;
  cmd += fmt::format("; exec {} --agent", p);
  cmd += "; fi";
  return cmd;
}

void check_local_host_once(const std::vector<HostSpec>& hosts,
                           const std::map<int, ssh::Target>& remote) {
  const HostSpec* first = nullptr;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (remote.count(static_cast<int>(i)) != 0) continue;
    if (first == nullptr) {
      first = &hosts[i];
      continue;
    }
    const HostSpec& second = hosts[i];
    throw UsageError(fmt::format(
        "hosts {} and {} are both this machine, so two ranks on it would get local_rank 0; list "
        "it once with all its slots (e.g. {}:{})",
        first->address_for_display(), second.address_for_display(), first->address_for_display(),
        first->slots + second.slots));
  }
}

std::map<int, ssh::Target> resolve_remote_hosts(const std::vector<HostSpec>& hosts,
                                                const LocalHost& local,
                                                const RemoteOptions& options) {
  std::map<int, ssh::Target> remote;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const HostSpec& h = hosts[i];
    // No ssh_config is read for a host that is plainly this machine.
    if (!options.force_ssh && local.is_local(h.name)) continue;
    ssh::Overrides overrides = options.overrides;
    if (!h.user.empty()) overrides.user = h.user;
    ssh::Target target;
    try {
      target = ssh::resolve(h.name, overrides, options.config);
    } catch (const ssh::Error& e) {
      // Messages that already start with the host name (ProxyJump ...) are not prefixed twice.
      const std::string what = e.what();
      const std::string prefix =
          what.rfind(h.name + ":", 0) == 0 ? "" : fmt::format("host {}: ", h.address_for_display());
      throw UsageError(
          fmt::format("{}{}; fix the ssh_config file or give another with --ssh-config", prefix,
                      what));
    }
    if (!options.force_ssh && local.is_local(target.hostname)) continue;
    remote.emplace(static_cast<int>(i), std::move(target));
  }
  return remote;
}

std::map<int, std::vector<int>> plan_fanout(const std::vector<int>& remote, int fanout) {
  std::map<int, std::vector<int>> tree;
  const bool relay = fanout > 0 && remote.size() > static_cast<std::size_t>(fanout);
  const std::size_t direct = relay ? static_cast<std::size_t>(fanout) : remote.size();
  for (std::size_t i = 0; i < direct; ++i) tree[remote[i]];
  for (std::size_t i = direct; i < remote.size(); ++i) {
    tree[remote[(i - direct) % direct]].push_back(remote[i]);
  }
  return tree;
}

namespace {

// The way around every failure that the fan-out tree adds.
constexpr std::string_view kNoTree = "--ssh-fanout 0 makes horarun connect to every host itself";

// Judges one host's probe (its output up to the agent's ready line): "" when the binary, the
// program and the agent are fine, and then `probe_output` holds the agent's interface report.
std::string judge_host(const ssh::RunResult& run, bool started, const RemoteOptions& options,
                       const std::string& where, std::string& probe_output) {
  const std::string verdict = judge_probe(run, started, options.horarun_path, where);
  if (!verdict.empty()) return verdict;
  const std::size_t nl = run.out.find('\n');
  probe_output = nl == std::string::npos ? std::string() : run.out.substr(nl + 1);
  return take_command_verdict(probe_output, options.command_check, where);
}

// The hosts relayed by the direct hosts of `plan` (the fan-out tree): asks each relaying agent to
// start them, waits for every RELAY_READY until `deadline`, and adds the hosts that started to
// `plan`; the others go to `problems`.
void prepare_relayed_hosts(RemotePlan& plan, const std::map<int, std::vector<int>>& tree,
                           const std::map<int, ssh::Target>& targets, const std::string& probe,
                           const RemoteOptions& options, ssh::Clock::time_point deadline,
                           std::map<int, std::string>& problems) {
  std::vector<agent::Stream*> streams;
  std::vector<std::shared_ptr<agent::RelayHub>> hubs;
  const auto now = ssh::Clock::now();
  for (const auto& [parent, children] : tree) {
    if (children.empty()) continue;
    const auto it = plan.hosts.find(parent);
    if (it == plan.hosts.end() || now >= deadline) {
      const std::string& name = targets.at(parent).alias;
      for (int child : children) {
        problems[child] =
            it == plan.hosts.end()
                ? fmt::format("{}: not tried: it is reached through {}, which failed ({})",
                              targets.at(child).describe(), name, kNoTree)
                : fmt::format(
                      "{}: not tried: the preflight's deadline passed before {} could "
                      "start its agent; raise --start-timeout",
                      targets.at(child).describe(), name);
      }
      continue;
    }
    // One RELAY_OPEN per batch of hosts that fits well inside a frame (kMaxPayload).
    std::shared_ptr<agent::RelayHub> hub = it->second.agent->relay_hub();
    agent::RelayOpen open;
    open.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    const std::size_t empty = agent::encode_relay_open(open).size();
    std::size_t bytes = empty;
    for (int child : children) {
      agent::RelayOpen one;
      one.hosts.push_back(agent::RelayTarget{static_cast<std::uint32_t>(child), targets.at(child),
                                             probe, agent::kReadyLine});
      const std::size_t more = agent::encode_relay_open(one).size() - empty;
      if (!open.hosts.empty() && bytes + more > agent::kMaxPayload / 2) {
        hub->open(open);
        open.hosts.clear();
        bytes = empty;
      }
      open.hosts.push_back(std::move(one.hosts.front()));
      bytes += more;
    }
    hub->open(open);
    hubs.push_back(hub);
    streams.push_back(&it->second.agent->stream());
  }
  if (hubs.empty()) return;
  // The relaying agents answer by `deadline`; a little more lets the last answer travel.
  const auto wait_until = deadline + std::chrono::seconds(2);
  try {
    agent::pump_streams_until(streams, wait_until, [&] {
      return std::all_of(hubs.begin(), hubs.end(), [](const auto& h) { return h->all_ready(); });
    });
  } catch (const std::system_error& e) {
    throw PreflightError(fmt::format("preflight: waiting for the relayed hosts: {}", e.what()));
  }

  for (const auto& [parent, children] : tree) {
    const auto pit = plan.hosts.find(parent);
    if (pit == plan.hosts.end()) continue;
    RemoteHost& via = pit->second;
    const std::shared_ptr<agent::RelayHub> hub = via.agent->relay_hub();
    for (int child : children) {
      const ssh::Target& target = targets.at(child);
      const std::string where =
          fmt::format("{}@{} via {}", target.user, target.describe(), via.target.alias);
      const std::optional<agent::RelayReady>& ready = hub->ready(static_cast<std::uint32_t>(child));
      if (!ready) {
        problems[child] =
            fmt::format("{}: no answer from {}, which was to start its agent ({}); {}", where,
                        via.target.alias,
                        hub->parent_error().empty() ? "raise --start-timeout" : hub->parent_error(),
                        kNoTree);
        continue;
      }
      if (!ready->error.empty()) {
        problems[child] = fmt::format(
            "{} [this connection was made from {}, whose agent starts this host's for horarun; "
            "{}]",
            ready->error, via.target.alias, kNoTree);
        continue;
      }
      if (!ready->ran) {
        problems[child] = where + ": the probe did not run; this is a horarun bug";
        continue;
      }
      std::string probe_output;
      const std::string verdict =
          judge_host(ready->run, ready->started, options, where, probe_output);
      if (!verdict.empty()) {
        problems[child] = verdict;
        continue;
      }
      RemoteHost host;
      host.index = child;
      host.target = target;
      host.relay_parent = via.target.alias;
      host.host_address = ready->remote_endpoint.empty()
                              ? target.hostname
                              : hora::endpoint_host(ready->remote_endpoint);
      host.launcher_address = source_address_towards(host.host_address);
      if (host.launcher_address.empty()) {
        problems[child] = fmt::format(
            "{}: no route from this machine to {}, which {} reached; its ranks could not reach "
            "the launcher ({})",
            where, host.host_address, via.target.alias, kNoTree);
        continue;
      }
      host.probe_output = std::move(probe_output);
      host.agent = agent::link_over_relay(host.describe(), hub, static_cast<std::uint32_t>(child));
      plan.hosts.emplace(child, std::move(host));
    }
  }
}

}  // namespace

RemotePlan prepare_remote_hosts(const std::map<int, ssh::Target>& targets,
                                const RemoteOptions& options) {
  RemotePlan plan;
  if (targets.empty()) return plan;
  std::vector<int> remote;
  for (const auto& [index, target] : targets) remote.push_back(index);
  const std::map<int, std::vector<int>> tree = plan_fanout(remote, options.ssh_fanout);

  // One request per direct host: connect, authenticate, and start the agent, which stays running.
  std::vector<ssh::ProbeRequest> requests;
  std::vector<int> owner;  // host index of each request
  const std::string probe =
      probe_command(options.horarun_path, command_probe_snippet(options.command_check));
  for (const auto& [index, relayed] : tree) {
    ssh::ProbeRequest req{targets.at(index), probe, {}, agent::kReadyLine};
    requests.push_back(std::move(req));
    owner.push_back(index);
  }

  ssh::PreflightOptions popts;
  popts.connect = options.connect;
  popts.keep_sessions = true;
  const auto t0 = ssh::Clock::now();
  const auto deadline = t0 + options.preflight_timeout;
  std::vector<ssh::ProbeResult> results = ssh::probe_hosts(requests, popts, deadline);

  std::map<int, std::string> problems;
  for (std::size_t i = 0; i < results.size(); ++i) {
    ssh::ProbeResult& r = results[i];
    const int index = owner[i];
    const ssh::Target& target = targets.at(index);
    if (!r.ok()) {
      problems[index] = r.error_message;
      continue;
    }
    const std::string where = fmt::format("{}@{}", target.user, target.describe());
    if (!r.run) {
      problems[index] = where + ": the probe did not run; this is a horarun bug";
      continue;
    }
    std::string probe_output;
    const std::string verdict =
        judge_host(*r.run, r.started != nullptr, options, where, probe_output);
    if (!verdict.empty()) {
      problems[index] = verdict;
      continue;
    }
    RemoteHost& host = plan.hosts[index];
    host.index = index;
    host.target = target;
    host.launcher_address = r.local_address;
    host.host_address =
        r.session ? hora::endpoint_host(r.session->remote_endpoint()) : target.hostname;
    host.probe_output = std::move(probe_output);
    host.session = std::move(r.session);
    host.agent = agent::link_over_ssh(target.describe(), *host.session, std::move(r.started),
                                      r.started_rest);
  }
  const std::size_t relayed = targets.size() - requests.size();
  if (relayed > 0) prepare_relayed_hosts(plan, tree, targets, probe, options, deadline, problems);
  launcher_log()->info(
      "preflight of {} host{}{} took {}", targets.size(), targets.size() == 1 ? "" : "s",
      relayed > 0 ? fmt::format(" ({} through the agents of {})", relayed, requests.size()) : "",
      hora::format_duration(
          std::chrono::duration_cast<std::chrono::milliseconds>(ssh::Clock::now() - t0)));
  if (!problems.empty()) {
    // Started agents end with their channels when `plan` goes away.
    std::string lines;
    for (const auto& [index, why] : problems) lines += "\n  " + why;
    throw PreflightError(
        fmt::format("preflight failed on {} of {} remote host{}; nothing was started:{}",
                    problems.size(), targets.size(), targets.size() == 1 ? "" : "s", lines));
  }
  return plan;
}

}  // namespace hora::cli
