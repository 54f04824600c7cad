// horarun's command line, horovodrun's spelling (docs/launcher.md lists every option).
//
// parse_options() is given argv and the environment as values: the core never reads argv or
// getenv itself (main.cc gathers them into a LaunchContext), so tests can pass any combination.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/base/environment.h"

namespace hora::cli {

// horovodrun's elastic flags (docs/elastic.md; horovod/runner/launch.py, "elastic arguments").
// Filled by parse_options(), which checks every value and their consistency: an elastic job
// has -H/--hostfile (or the Slurm allocation) or a discovery script, not both; min_np <= -np
// <= max_np. Outside an elastic job the other flags are accepted and have no effect (as
// horovodrun, which ignores them in a fixed-size job).
struct ElasticOptions {
  static constexpr std::chrono::seconds kDefaultTimeout{600};  // Horovod's ELASTIC_TIMEOUT_SECS
  // horovod/runner/elastic/discovery.py's bounds of --blacklist-cooldown-range.
  static constexpr int kMinCooldownSeconds = 1;
  static constexpr int kMaxCooldownSeconds = 3600;

  // --min-np/--min-num-proc, else -np (as horovodrun): the fewest ranks the job runs with.
  // 0 outside an elastic job.
  int min_np = 0;
  std::optional<int> max_np;     // --max-np/--max-num-proc; unset: no bound but the slots
  std::string discovery_script;  // --host-discovery-script; empty: the hosts of -H/--hostfile
  // --slots-per-host: the slots of a host the script prints without ":slots"; unset: such a
  // line is an error (cli/elastic/discovery_script.h).
  std::optional<int> slots_per_host;
  // --elastic-timeout, else HOROVOD_ELASTIC_TIMEOUT, else 600 s: how long the job waits for
  // --min-np slots.
  std::chrono::seconds elastic_timeout = kDefaultTimeout;
  std::optional<int> reset_limit;  // --reset-limit: the most resets; unset: no limit
  // --blacklist-cooldown-range MIN MAX (seconds, MIN <= MAX, within the bounds above); unset:
  // a failed host stays blacklisted for the rest of the job.
  std::optional<std::pair<std::chrono::seconds, std::chrono::seconds>> blacklist_cooldown;
  // --horovod-elastic: serve Horovod's elastic rendezvous, for programs of Horovod's own package
  // (cli/elastic/horovod_elastic.h). Off: a Horovod worker is recognised at its first request
  // and the job ends naming this flag.
  bool horovod = false;
  // Set by parse_options() when --min-np, --max-np or --host-discovery-script is given.
  bool enabled = false;

  bool elastic() const { return enabled; }
};

struct Options {
  static constexpr std::chrono::seconds kDefaultStartTimeout{30};
  static constexpr const char* kDefaultStrictHostKeyChecking = "accept-new";
  static constexpr const char* kDefaultLogLevel = "warning";
  static constexpr int kDefaultSshFanout = 64;  // RemoteOptions::kDefaultSshFanout

  std::optional<int> num_proc;                                // -np/--num-proc
  std::string hosts;                                          // -H/--hosts, unparsed
  std::string hostfile;                                       // --hostfile
  std::chrono::seconds start_timeout = kDefaultStartTimeout;  // or HOROVOD_START_TIMEOUT
  bool verbose = false;
  std::string output_filename;    // --output-filename DIR
  bool prefix_timestamp = false;  // --prefix-output-with-timestamp, mpirun's --timestamp-output
  bool tag_output = false;        // mpirun's --tag-output: lines tagged [1,RANK]<stdout>:
  bool merge_stderr = false;      // mpirun's --merge-stderr-to-stdout
  // mpirun's -wdir/--wdir DIR: the ranks' working directory (relative to horarun's); empty: hers.
  std::string working_directory;
  bool oversubscribe = false;  // mpirun's --oversubscribe: -np above the slots spreads the rest
  bool display_map = false;    // mpirun's --display-map/--report-bindings: print the rank table
  std::string log_level;       // --log-level; empty: not given
  bool check_build = false;    // -cb/--check-build
  bool dry_run = false;

  // Parsed now, used by the SSH launcher and by the network interface selection.
  std::optional<int> ssh_port;    // -p/--ssh-port
  std::string ssh_identity_file;  // -i/--ssh-identity-file
  std::string ssh_config;         // --ssh-config FILE
  // --ssh-fanout: past this many remote hosts, horarun connects to this many and their agents
  // start the others' (cli/remote/remote_hosts.h); 0: every host directly.
  int ssh_fanout = kDefaultSshFanout;
  std::string ssh_strict_host_key_checking = kDefaultStrictHostKeyChecking;
  // Given on the command line: then it wins over StrictHostKeyChecking in ssh_config.
  bool ssh_strict_host_key_checking_given = false;
  std::vector<std::string> network_interfaces;  // --network-interfaces a,b and --network-interface
  // -x/--env NAME[=VALUE], in order, resolved: `-x NAME` takes NAME's value from the
  // environment given to parse_options.
  std::vector<std::pair<std::string, std::string>> env_forward;
  bool tcp = false;  // --tcp: NCCL_IB_DISABLE=1
  // horovodrun's engine flags, as the runtime's variables (docs/launcher.md lists the mapping):
  // --timeline-filename, --timeline-mark-cycles, --fusion-threshold-mb, --cycle-time-ms,
  // --cache-capacity, --no-stall-check, --stall-check-warning-time-seconds,
  // --stall-check-shutdown-time-seconds, --gloo-timeout-seconds.
  std::vector<std::pair<std::string, std::string>> tuning;
  bool force_ssh = false;
  // --launcher: how remote hosts' agents are started. "ssh", or "slurm" (srun, one step per
  // node); "auto" (the default) is slurm inside a Slurm allocation when neither -H nor
  // --hostfile is given, else ssh. Resolved here: `slurm` says which.
  bool slurm = false;
  // With slurm and no -H/--hostfile: the hosts and slots are the allocation's, read once by the
  // launch pipeline (cli/launch/job_hosts.h, cli/hosts/slurm_allocation.h); -np may be omitted.
  bool hosts_from_allocation = false;
  std::string horarun_path;  // --horarun-path
  // horovodrun's flags and hora's Horovod support (cli/options/horovod_flags.h).
  bool horovod_rendezvous = true;   // --no-horovod-rendezvous turns it off
  bool forward_environment = true;  // --no-env-forwarding: only the contract and -x

  // Elastic jobs (docs/elastic.md). In an elastic job -np is set: the ranks of round 0 (given,
  // else --min-np).
  ElasticOptions elastic;
  // --max-restarts N (torchrun's habit): on a failure, restart the whole job up to N times.
  // 0: never. Not with the elastic flags (an elastic job resets instead).
  int max_restarts = 0;

  std::vector<std::string> command;  // everything after the options

  std::string help_text;  // non-empty: --help was given; print and exit 0
  // Said once at warning level by parse_options(): accepted options that do nothing in hora
  // (mpirun's --allow-run-as-root, --mca), naming what they would have done.
  std::vector<std::string> warnings;
};

// args excludes argv[0]. Throws UsageError with a message that says what to change.
Options parse_options(const std::vector<std::string>& args, const Environment& env);

// The command line split where the user's command begins (the first argument that is neither
// an option nor an option's value, or the one after `--`; CLI11's remaining arguments), with
// horovodrun's multi-letter single-dash options (-np, -cb, -prefix-timestamp) rewritten to their
// long forms in the options part only: CLI11 cannot declare them. Throws UsageError as
// parse_options does. Exposed for tests.
struct SplitCommandLine {
  std::vector<std::string> options;
  std::vector<std::string> command;
};
SplitCommandLine split_command_line(const std::vector<std::string>& args);

}  // namespace hora::cli
