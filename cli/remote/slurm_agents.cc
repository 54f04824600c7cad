#include "cli/remote/slurm_agents.h"

#include <cstring>
#include <map>

#include <fmt/format.h>

#include "cli/agent/pipe_stream.h"
#include "cli/network/probe.h"
#include "cli/network/source_address.h"
#include "cli/output/log.h"
#include "common/duration.h"

namespace hora::cli {

std::vector<std::string> srun_agent_command(const std::string& node,
                                            const std::string& horarun_path,
                                            const std::string& command_snippet) {
  // One task on that node; --overlap lets the agents' steps share the allocation with each
  // other and with the user's own steps; --kill-on-bad-exit ends the step with the agent.
  // The task is the same probe command as over SSH (the binary and program checks, then `exec
  // horarun --agent`), run by /bin/sh: srun starts no login shell.
  return {"srun", "--nodes=1", "--ntasks=1", "--nodelist=" + node, "--overlap",
          "--kill-on-bad-exit=1", "--quiet",
          // slurmstepd otherwise holds a task's output until a newline; frames are binary.
          "--unbuffered", "--job-name=hora-agent", "/bin/sh", "-c",
          probe_command(horarun_path, command_snippet)};
}

RemotePlan prepare_slurm_hosts(const std::vector<HostSpec>& hosts, const LocalHost& local,
                               const std::string& horarun_path, const CommandCheck& command_check,
                               std::chrono::seconds timeout) {
  RemotePlan plan;
  std::map<int, std::unique_ptr<agent::PipeStream>> streams;
  std::map<int, std::string> problems;
  const auto t0 = agent::PipeStream::Clock::now();
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (local.is_local(hosts[i].name)) continue;
    auto s = std::make_unique<agent::PipeStream>(
        srun_agent_command(hosts[i].name, horarun_path, command_probe_snippet(command_check)));
    std::string error;
    if (!s->spawn(error)) {
      problems[static_cast<int>(i)] = fmt::format("{}: cannot run srun: {}", hosts[i].name, error);
      continue;
    }
    streams.emplace(static_cast<int>(i), std::move(s));
  }
  const auto deadline = t0 + timeout;
  for (auto& [index, s] : streams) {
    const HostSpec& h = hosts[static_cast<std::size_t>(index)];
    agent::PipeStream::Started st = s->wait_ready(deadline);
    const std::string where = h.name + " (srun)";
    if (has_probe_line(st.before)) {
      // The probe ran: the binary and program checks speak for themselves, as over SSH.
      ssh::RunResult run;
      run.out = st.before;
      run.err = st.failure;
      std::string verdict = judge_probe(run, st.ready, horarun_path, where);
      const std::size_t nl = st.before.find('\n');
      st.before = nl == std::string::npos ? std::string() : st.before.substr(nl + 1);
      if (verdict.empty()) verdict = take_command_verdict(st.before, command_check, where);
      if (!verdict.empty()) {
        problems[index] = verdict;
        continue;
      }
    }
    if (!st.ready) {
      problems[index] = fmt::format(
          "{}: the agent did not start through srun ({}); check that the node is in this "
          "allocation (scontrol show job $SLURM_JOB_ID) and that {} exists there",
          h.name, st.failure, horarun_path);
      continue;
    }
    RemoteHost host;
    host.index = index;
    host.via_srun = true;
    host.target.alias = h.name;
    host.target.hostname = h.name;
    host.probe_output = st.before;
    // The node's address as its own interfaces say, and ours as the route towards it says.
    try {
      for (const NetworkInterface& nic : parse_interfaces(st.before, h.name)) {
        if (!nic.up || nic.loopback || nic.preferred_address().empty()) continue;
        host.host_address = nic.preferred_address();
        break;
      }
    } catch (const Error& e) {
      problems[index] = e.what();
      continue;
    }
    host.launcher_address = source_address_towards(host.host_address);
    if (host.launcher_address.empty()) {
      problems[index] = fmt::format(
          "{}: no route from this machine to the node's address {}; give the hosts' interfaces "
          "with --network-interfaces",
          h.name, host.host_address.empty() ? "(none found)" : host.host_address);
      continue;
    }
    host.agent = agent::link_over_pipe(h.name, std::move(s));
    plan.hosts.emplace(index, std::move(host));
  }
  launcher_log()->info("started {} agent{} through srun in {}", streams.size(),
                       streams.size() == 1 ? "" : "s",
                       hora::format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(
                           agent::PipeStream::Clock::now() - t0)));
  if (!problems.empty()) {
    std::string lines;
    for (const auto& [index, why] : problems) lines += "\n  " + why;
    throw PreflightError(
        fmt::format("starting the agents through srun failed on {} of {} "
                    "host{}; nothing was started:{}",
                    problems.size(), hosts.size(), hosts.size() == 1 ? "" : "s", lines));
  }
  return plan;
}

}  // namespace hora::cli
