// Step 4 of "A job's life" (docs/architecture.md; cli/launch/launcher.h): which interface every
// host's ranks use, and where the rendezvous server listens (docs/network.md, "Where the choice
// goes").
//
// choose_job_network() gathers every host's interfaces (remote: the preflight's
// --probe-interfaces output; this machine: getifaddrs), then decides:
//   --network-interfaces given     -> the named interfaces, checked on every host;
//   every host is this machine     -> loopback;
//   one remote host                -> its best interface (the one SSH reached it on first);
//   otherwise                      -> discovery (cli/launch/discovery.h) across all hosts, this
//                                     machine taking part in-process when it runs ranks.
// apply_job_network() turns the choice into the supervisor's configuration.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "cli/hosts/rank_table.h"
#include "cli/network/choice.h"
#include "cli/network/spec.h"
#include "cli/remote/remote_hosts.h"
#include "cli/spawn/supervisor_config.h"

namespace hora::cli {

struct JobNetwork {
  std::vector<HostInterfaces> probed;  // per rank-table host
  std::optional<Reachability> reach;   // when discovery ran
  std::chrono::milliseconds discovery_time{0};
  NetworkChoice choice;  // per rank-table host, in the same order
};

// Throws UsageError (the spec does not fit), NetworkError (discovery failed or found no
// routable set; exit 1). Discovery has one deadline: min(10 s, start_timeout) from now. Uses
// the plan's session and agent per remote host (nobody else may use them meanwhile).
JobNetwork choose_job_network(const RankTable& table, RemotePlan& plan, const NetworkSpec& spec,
                              std::chrono::seconds start_timeout);

// Sets config's bind_address, iface, nccl_ifnames, master_addr, master_port_probe_address and
// host_network from the choice:
//   - the launcher's host runs ranks: the server binds its chosen address and every host is
//     told that address;
//   - all hosts remote: every host is told the address its SSH connection came from; the server
//     binds that address when all hosts saw the same one, else the wildcard;
//   - MASTER_ADDR is rank 0's host's chosen address.
void apply_job_network(const JobNetwork& network, const RankTable& table, const RemotePlan& plan,
                       SupervisorConfig& config);

}  // namespace hora::cli
