// The launch pipeline of an elastic job (docs/elastic.md): the hosts come from
// --host-discovery-script (run once now, then by the supervisor about once a second) or from
// -H/--hostfile; the hosts known now are preflighted as in a fixed job, hosts found later by the
// supervisor through ElasticHosts (their preflight runs on a thread of its own); then
// ElasticSupervisor runs the rounds (cli/elastic/elastic_supervisor.h).
//
// The network: ranks reach the launcher at the address their host's SSH connection came from
// (this machine's own ranks: loopback in a job of this machine only, else that address too), the
// rounds' servers listen on the wildcard address when any host is remote, and interfaces are
// chosen by route (HORA_IFACE unset) unless --network-interfaces names one.
#pragma once

#include "cli/launch/launcher.h"
#include "cli/options/options.h"

namespace hora::cli {

// Runs an elastic job to its end; returns horarun's exit code. Throws UsageError for a bad
// host list or a discovery script that fails at the start, Error when nothing could start.
int launch_elastic(const Options& options, const LaunchContext& ctx);

}  // namespace hora::cli
