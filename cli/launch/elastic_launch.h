// The launch pipeline of an elastic job (docs/elastic.md): the hosts come from
// --host-discovery-script (run once now, then by the supervisor about once a second) or from
// -H/--hostfile; the hosts known now are preflighted as in a fixed job, hosts found later by the
// supervisor through ElasticHosts (their preflight runs on a thread of its own); then
// the Supervisor runs the rounds (cli/elastic/supervisor.h), as it runs a fixed job's one round.
//
// The first listing of a discovery script is treated as every later one: this machine under a
// second name is ignored, and hosts whose address cannot be resolved are left out while the
// others have --min-np slots (each with a warning).
//
// The network and the configuration are a fixed job's (cli/launch/job_config.h): the interface
// choice runs over the hosts known at the start (--network-interfaces checked, or the probes),
// and each round's server listens where its hosts reach this machine, as a fixed job's does
// (loopback for a round of this machine only, the address the remote hosts reach, or every
// address when they reach it at different ones). Hosts found later reach the launcher where their
// SSH connection came from and take the interface their route goes through.
#pragma once

#include "cli/launch/launcher.h"
#include "cli/options/options.h"

namespace hora::cli {

// Runs an elastic job to its end; returns horarun's exit code. Throws UsageError for a bad
// host list or a discovery script that fails at the start, Error when nothing could start.
int launch_elastic(const Options& options, const LaunchContext& ctx);

}  // namespace hora::cli
