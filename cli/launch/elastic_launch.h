// The launch pipeline of an elastic job (docs/elastic.md): the hosts come from
// --host-discovery-script (run once now, then by the supervisor about once a second) or from
// -H/--hostfile; the hosts known now are preflighted as in a fixed job, hosts found later by the
// supervisor through ElasticHosts (their preflight runs on a thread of its own); then
// ElasticSupervisor runs the rounds (cli/elastic/elastic_supervisor.h).
//
// The first listing of a discovery script is treated as every later one: this machine under a
// second name is ignored, and hosts whose address cannot be resolved are left out while the
// others have --min-np slots (each with a warning).
//
// The network: ranks reach the launcher at the address their host's SSH connection came from;
// each round's server listens where its hosts reach it, as a fixed job's does (loopback for a
// round of this machine only, the remote hosts' common address, or every address when they
// differ), and interfaces are chosen by route (HORA_IFACE unset) unless --network-interfaces
// names one.
#pragma once

#include "cli/launch/launcher.h"
#include "cli/options/options.h"

namespace hora::cli {

// Runs an elastic job to its end; returns horarun's exit code. Throws UsageError for a bad
// host list or a discovery script that fails at the start, Error when nothing could start.
int launch_elastic(const Options& options, const LaunchContext& ctx);

}  // namespace hora::cli
