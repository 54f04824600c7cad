// Agents started through Slurm (docs/slurm.md): inside an allocation, `--launcher slurm` (or
// auto) starts each remote host's agent as a one-task srun step on that node instead of over SSH,
// so no SSH keys are needed. The rest of the job — discovery, rendezvous, guards, output,
// fail-fast — runs through the agents exactly as with SSH (cli/agent/).
//
// Lifetime: each srun is horarun's child (PR_SET_PDEATHSIG) and its stdin/stdout are a socket
// to horarun. When horarun closes it (the job ended) or dies, the agent's stdin ends and it stops
// every rank; `scancel` ends the steps, the agents with them, and the agents' guards stop their
// ranks when their stdin closes.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cli/hosts/host_list.h"
#include "cli/hosts/local_host.h"
#include "cli/remote/remote_hosts.h"

namespace hora::cli {

// `srun ... /bin/sh -c '<probe_command>'` for one node: the binary and program checks, then
// `exec <horarun_path> --agent`.
std::vector<std::string> srun_agent_command(const std::string& node,
                                            const std::string& horarun_path,
                                            const std::string& command_snippet = "");

// Starts an agent on every host of `hosts` that is not this machine, all at once, and waits
// for every one to be ready within `timeout`. Throws PreflightError naming every host that
// failed (srun's own message included), like prepare_remote_hosts. `command_check`: the user's
// program, checked on every node as over SSH (cli/remote/command_probe.h).
RemotePlan prepare_slurm_hosts(const std::vector<HostSpec>& hosts, const LocalHost& local,
                               const std::string& horarun_path, const CommandCheck& command_check,
                               std::chrono::seconds timeout);

}  // namespace hora::cli
