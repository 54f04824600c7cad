// Which hosts are remote, how to reach them, and whether they are ready: steps 2 and 3 of "A
// job's life" (docs/architecture.md; cli/launch/launcher.h). resolve_remote_hosts() resolves
// every remote host through ssh_config (the launch pipeline does it once); prepare_remote_hosts()
// then preflights all of them at once with one deadline:
// connect, host key, authentication, and
// a probe command that checks the horarun binary at the remote path (and, when the caller gives
// one, runs an extra probe such as `horarun --probe-interfaces`). Any failure on any host throws
// one PreflightError listing every failing host with its reason and fix; nothing is launched.
//
// Local detection never looks a name up in DNS: a host is local when its name as given is
// (LocalHost::is_local), or when ssh_config maps it to a HostName that is; everything else is
// remote. With force_ssh every host is remote.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/agent/agent_link.h"
#include "cli/agent/ssh_stream.h"
#include "cli/base/errors.h"
#include "cli/hosts/host_list.h"
#include "cli/hosts/local_host.h"
#include "cli/remote/command_probe.h"
#include "ssh/config.h"
#include "ssh/session.h"

namespace hora::cli {

// Some host failed the preflight. horarun exits 1.
class PreflightError : public Error {
  using Error::Error;
};

struct RemoteOptions {
  static constexpr std::chrono::seconds kDefaultPreflightTimeout{30};
  // Past this many remote hosts, horarun connects to this many only, and their agents start the
  // others' (the fan-out tree); 0: every host directly.
  static constexpr int kDefaultSshFanout = 64;

  bool force_ssh = false;
  ssh::ConfigSource config;     // --ssh-config (file empty: ~/.ssh/config, /etc/ssh/ssh_config)
  ssh::Overrides overrides;     // -p, -i, --ssh-strict-host-key-checking; user set per host
  ssh::ConnectOptions connect;  // agent socket, resolver
  std::string horarun_path;     // the agent binary on every remote host (absolute)
  std::chrono::seconds preflight_timeout = kDefaultPreflightTimeout;
  // The user's program, checked on every host before the extra probe (cli/remote/command_probe.h).
  CommandCheck command_check;
  int ssh_fanout = kDefaultSshFanout;  // --ssh-fanout
};

struct RemoteHost {
  int index = 0;  // into the rank table's hosts
  ssh::Target target;
  std::string launcher_address;  // this machine as the host sees it (Session::local_address)
  std::string host_address;      // the address we connected to, without port
  std::string probe_output;      // the agent's interface report (--probe-interfaces format)
  // The one connection to the host, and the agent running on it (cli/agent/): every later
  // command of the job on this host — probes, guards — goes through the agent.
  std::unique_ptr<ssh::Session> session;
  std::unique_ptr<agent::AgentLink> agent;
  bool via_srun = false;  // started by srun (cli/remote/slurm_agents.h): no session
  // Reached through this host's agent (the fan-out tree: it connected over SSH and carries the
  // agent's bytes); empty when horarun connected itself. No session then either.
  std::string relay_parent;

  // "h1 (198.18.0.11:12345)" over SSH, "h1 (srun)" under Slurm, "h9 (198.18.0.19:12345) via
  // h1" through another host.
  std::string describe() const {
    if (via_srun) return target.alias + " (srun)";
    return relay_parent.empty() ? target.describe() : target.describe() + " via " + relay_parent;
  }
  // What carries the agent, for messages about a lost host.
  std::string carrier() const {
    if (via_srun) return "srun step";
    return relay_parent.empty() ? "SSH connection" : "SSH connection from " + relay_parent;
  }
};

struct RemotePlan {
  std::map<int, RemoteHost> hosts;  // by host index; hosts not in it run locally
  bool any() const { return !hosts.empty(); }
};

// Which of `hosts` (the rank table's hosts) are remote, resolved through ssh_config. Pure
// apart from reading the config files. Throws UsageError for a config error.
std::map<int, ssh::Target> resolve_remote_hosts(const std::vector<HostSpec>& hosts,
                                                const LocalHost& local,
                                                const RemoteOptions& options);

// Throws UsageError when two of `hosts` (the rank table's hosts) are both this machine, i.e.
// neither is in `remote` (e.g. -H localhost:2,127.0.0.1:2): the machine would be two hosts of the
// job, and two ranks on it would get local_rank 0. The message names both and the fix.
void check_local_host_once(const std::vector<HostSpec>& hosts,
                           const std::map<int, ssh::Target>& remote);

// The one command run on every host (exposed for tests): prints one line
// `HORA-PROBE ok|missing|not-executable`, the program check's line when `command_snippet` is
// given, then execs `<horarun_path> --agent`, which prints the interfaces and its ready line.
std::string probe_command(const std::string& horarun_path, const std::string& command_snippet = "");

// Whether `out` starts with probe_command()'s first line.
bool has_probe_line(const std::string& out);

// Judges probe_command()'s output up to the agent's ready line (`run.out`; `started`: the ready
// line came): "" when the binary is there and the agent started, else the problem, naming
// `where` and the fix. Shared by the SSH and the srun paths.
std::string judge_probe(const ssh::RunResult& run, bool started, const std::string& horarun_path,
                        const std::string& where);

// Which remote hosts horarun connects to itself, and which each of those reaches for it (the
// fan-out tree): with more than `fanout` hosts (and fanout > 0), the first `fanout` are direct
// and the others are dealt round-robin among them. Keys: the direct hosts' indexes (all of them);
// values: the hosts each relays, in order. Pure; exposed for tests.
std::map<int, std::vector<int>> plan_fanout(const std::vector<int>& remote, int fanout);

// Preflights `targets` (resolve_remote_hosts() of the job's hosts, by host index): one SSH
// connection and one exec channel per remote host, on which the agent then keeps running; past
// options.ssh_fanout hosts, the direct hosts' agents make the other connections (plan_fanout).
// Throws PreflightError naming every failing host.
RemotePlan prepare_remote_hosts(const std::map<int, ssh::Target>& targets,
                                const RemoteOptions& options);

}  // namespace hora::cli
