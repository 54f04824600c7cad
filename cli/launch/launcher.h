// The launch pipeline: one job from the command line to horarun's exit code, step by step
// (docs/architecture.md, "A job's life"):
//   1. parse      the command line (cli/options/options.h)
//   2. resolve    the host list or hostfile into the rank table; check --network-interfaces
//                 (cli/hosts/, cli/network/spec.h)
//   3. preflight  every remote host over SSH (cli/remote/remote_hosts.h)
//   4. network    choose each host's interface and the launcher's address
//                 (cli/launch/job_network.h); --dry-run stops here
//   5. rendezvous, spawn and supervise: the Supervisor runs the job as one round: the
//                 rendezvous server, every rank's guard, the fixed failure policy and the end
//                 (cli/elastic/supervisor.h); an elastic job runs its rounds there too
//
// main.cc gathers argv, the environment and the working directory and maps exceptions to exit
// codes; everything else happens here, so tests drive a whole job through run_launcher().
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

#include "cli/options/options.h"
#include "cli/remote/remote_hosts.h"

namespace hora::cli {

// What the launcher takes from the process that runs it. Tests fill it directly.
struct LaunchContext {
  std::vector<std::string> args;  // argv without argv[0]
  Environment env;                // the environment (-x NAME, HOROVOD_START_TIMEOUT)
  std::string cwd;                // the ranks' working directory
  int stdout_fd = STDOUT_FILENO;  // rank stdout, --help, --check-build, --dry-run/--verbose text
  int stderr_fd = STDERR_FILENO;  // rank stderr and the job's verdict
  // The binary that local ranks' guards run (`LOCAL_GUARD --guard`). horarun is its own guard;
  // a test program, which is not, points it at the built horarun.
  std::string local_guard = "/proc/self/exe";
};

// Runs horarun for `ctx`: --help and --check-build print and return 0; otherwise runs the job
// and returns horarun's exit code (docs/errors.md). Throws UsageError (exit code 2) for a bad
// command line, host list or hostfile, and Error (exit code 1) when the job cannot start.
int run_launcher(const LaunchContext& ctx);

// How the job reaches its remote hosts: ssh_config, -p/-i, --ssh-strict-host-key-checking, the
// horarun path and the program check (a step shared by the fixed and the elastic launch).
// Throws UsageError for a bad --ssh-config.
RemoteOptions remote_options(const Options& options, const LaunchContext& ctx);

}  // namespace hora::cli
