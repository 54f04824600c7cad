// Step 2 of "A job's life" (docs/architecture.md; cli/launch/launcher.h): the hosts the job
// names, its rank table and its --network-interfaces spec, checked against each other before any
// connection is made. Each source of hosts is read here and only here, once per launch: -H, the
// hostfile, or the Slurm allocation's variables (cli/hosts/slurm_allocation.h) when the options
// say the hosts come from the allocation.
#pragma once

#include <vector>

#include "cli/base/environment.h"
#include "cli/hosts/host_list.h"
#include "cli/hosts/rank_table.h"
#include "cli/network/spec.h"
#include "cli/options/options.h"

namespace hora::cli {

struct JobHosts {
  RankTable table;
  NetworkSpec spec;
};

// The hosts as listed: the allocation's, the hostfile's, -H's, or this machine with -np slots.
// Throws UsageError (a malformed list, file or Slurm variable).
std::vector<HostSpec> listed_hosts(const Options& options, const Environment& env);

// The rank table (-np, or every slot when -np is not given) and the network spec, checked
// against the hosts. Throws UsageError.
JobHosts resolve_job_hosts(const Options& options, const Environment& env);

}  // namespace hora::cli
