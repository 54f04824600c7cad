// What a job's supervisor is configured with, from the command line, horarun's environment and
// the job's network: one function for fixed and elastic jobs, so both give their ranks the same
// JobFacts (start timeout, log level, forwarded and tuning variables, the launcher environment's
// defaults), the same stall check and the same interface choice and rendezvous address
// (cli/launch/job_network.h).
#pragma once

#include "cli/base/environment.h"
#include "cli/hosts/rank_table.h"
#include "cli/launch/job_network.h"
#include "cli/launch/launcher.h"
#include "cli/options/options.h"
#include "cli/remote/remote_hosts.h"
#include "cli/spawn/supervisor_config.h"

namespace hora::cli {

// The stall settings the ranks will see: -x NAME=V, else the flags (tuning), else horarun's own
// environment, which local ranks inherit.
SupervisorConfig::StallCheck stall_check(const JobFacts& facts, const Environment& env);

// Everything but the network: the command, the ranks' working directory, JobFacts (the launcher
// environment's defaults computed for `table`'s layout), the stall check, --max-restarts, the
// Horovod rendezvous switch. Warns once per -x that overrides a variable horarun sets.
SupervisorConfig job_config(const Options& options, const LaunchContext& ctx,
                            const RankTable& table);

// job_config() with the job's network applied (apply_job_network()): the fixed job's whole
// configuration. Logs the address each remote host reaches the launcher at (--verbose).
SupervisorConfig supervisor_config(const Options& options, const LaunchContext& ctx,
                                   const RankTable& table, const JobNetwork& network,
                                   const RemotePlan& plan);

}  // namespace hora::cli
