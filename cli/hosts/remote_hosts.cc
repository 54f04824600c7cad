#include "cli/hosts/remote_hosts.h"

#include <fmt/format.h>

#include "cli/agent/agent.h"
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

RemotePlan prepare_remote_hosts(const std::vector<HostSpec>& hosts, const LocalHost& local,
                                const RemoteOptions& options) {
  RemotePlan plan;
  const std::map<int, ssh::Target> targets = resolve_remote_hosts(hosts, local, options);
  if (targets.empty()) return plan;

  // One request per host: connect, authenticate, and start the agent, which stays running.
  std::vector<ssh::ProbeRequest> requests;
  std::vector<int> owner;  // host index of each request
  const std::string probe =
      probe_command(options.horarun_path, command_probe_snippet(options.command_check));
  for (const auto& [index, target] : targets) {
    ssh::ProbeRequest req{target, probe, {}, agent::kReadyLine};
    requests.push_back(std::move(req));
    owner.push_back(index);
  }

  ssh::PreflightOptions popts;
  popts.connect = options.connect;
  popts.keep_sessions = true;
  const auto t0 = ssh::Clock::now();
  std::vector<ssh::ProbeResult> results =
      ssh::probe_hosts(requests, popts, t0 + options.preflight_timeout);
  launcher_log()->info("preflight of {} host{} took {}", targets.size(),
                       targets.size() == 1 ? "" : "s",
                       hora::format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(
                           ssh::Clock::now() - t0)));

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
    const std::string verdict =
        judge_probe(*r.run, r.started != nullptr, options.horarun_path, where);
    if (!verdict.empty()) {
      problems[index] = verdict;
      continue;
    }
    const std::string& out = r.run->out;
    const std::size_t nl = out.find('\n');
    std::string probe_output = nl == std::string::npos ? std::string() : out.substr(nl + 1);
    const std::string missing = take_command_verdict(probe_output, options.command_check, where);
    if (!missing.empty()) {
      problems[index] = missing;
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
