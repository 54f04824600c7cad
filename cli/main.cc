// horarun's entry point: gathers argv, the environment and the working directory, hands them
// to the launcher's core and maps its exceptions to exit codes (docs/errors.md).
// `horarun --guard` is the hidden guard mode every rank runs under (docs/launcher.md).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command_probe.h"
#include "cli/env_forwarding.h"
#include "cli/errors.h"
#include "cli/guard.h"
#include "cli/job_network.h"
#include "cli/local_host.h"
#include "cli/log.h"
#include "cli/network_choice.h"
#include "cli/network_probe.h"
#include "cli/network_spec.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/rank_table.h"
#include "cli/remote_hosts.h"
#include "cli/ssh_rank_process.h"
#include "cli/supervisor.h"
#include "ssh/known_hosts.h"

extern char** environ;

namespace {

using namespace hora::cli;

Environment gather_environment() {
  Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

std::string current_directory() {
  std::vector<char> buf(4096);
  while (::getcwd(buf.data(), buf.size()) == nullptr) {
    if (errno != ERANGE) {
      throw Error(fmt::format("cannot read the current directory: {}", std::strerror(errno)));
    }
    buf.resize(buf.size() * 2);
  }
  return buf.data();
}

int check_build() {
#ifdef HORA_BUILT_WITH_NCCL
  const bool nccl = true;
#else
  const bool nccl = false;
#endif
  fmt::print("hora {}: available backends:\n  [X] Gloo (CPU collectives)\n  [{}] NCCL (GPU "
             "collectives)\n",
             HORA_VERSION, nccl ? "X" : " ");
  return 0;
}

std::vector<HostSpec> host_list(const Options& options) {
  if (!options.hostfile.empty()) return read_hostfile(options.hostfile);
  if (!options.hosts.empty()) return parse_host_list(options.hosts);
  return {HostSpec{"", "localhost", *options.num_proc}};
}

// This binary's absolute path: the default --horarun-path (the same install on every host).
std::string self_path() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) {
    throw Error(fmt::format("cannot read /proc/self/exe ({}); give --horarun-path",
                            std::strerror(errno)));
  }
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

RemoteOptions remote_options(const Options& options) {
  RemoteOptions ro;
  ro.force_ssh = options.force_ssh;
  if (!options.ssh_config.empty()) ro.config.file = options.ssh_config;
  ro.overrides.port = options.ssh_port;
  if (!options.ssh_identity_file.empty()) {
    ro.overrides.identity_files.push_back(options.ssh_identity_file);
  }
  if (options.ssh_strict_host_key_checking_given) {
    ro.overrides.host_key_policy = hora::ssh::parse_host_key_policy(
        options.ssh_strict_host_key_checking, "--ssh-strict-host-key-checking");
  }
  ro.connect = hora::ssh::ConnectOptions::from_environment();
  ro.horarun_path = options.horarun_path.empty() ? self_path() : options.horarun_path;
  ro.preflight_timeout = options.start_timeout;
  // Every remote host reports its interfaces in the preflight (DESIGN.md step 3).
  ro.extra_probe_args = "--probe-interfaces";
  ro.command_check = command_check_for(options, gather_environment(), current_directory());
  return ro;
}

int launch(const Options& options) {
  const std::vector<HostSpec> hosts = host_list(options);
  const RankTable table(hosts, options.num_proc.value_or(total_slots(hosts)));
  // A malformed --network-interfaces, or one naming a host not in the job, is a usage error
  // before any connection is made.
  const NetworkSpec spec = parse_network_spec(options.network_interfaces);
  {
    std::vector<std::string> names;
    for (const HostSpec& h : table.hosts()) names.push_back(h.name);
    check_spec_hosts(spec, names);
  }

  const LocalHost local = LocalHost::discover();
  const RemoteOptions ro = remote_options(options);
  if (options.dry_run || options.verbose) {
    const auto remote = resolve_remote_hosts(table.hosts(), local, ro);
    fmt::print("{}", table.describe());
    for (std::size_t i = 0; i < table.hosts().size(); ++i) {
      const HostSpec& h = table.hosts()[i];
      const auto it = remote.find(static_cast<int>(i));
      fmt::print("host {}: {} rank{}, {}\n", h.address_for_display(), h.slots,
                 h.slots == 1 ? "" : "s",
                 it != remote.end() ? "over SSH to " + it->second.describe() : "local");
    }
    std::fflush(stdout);
  }

  // Steps 3 and 4 (DESIGN.md): preflight every remote host, then choose the interfaces
  // (cli/job_network.h). --dry-run does both, so it shows what a launch would use, and stops
  // before any rank starts.
  std::vector<int> ranks_per_host(table.hosts().size(), 0);
  for (int r = 0; r < table.size(); ++r) ++ranks_per_host.at(table.rank(r).host_index);
  RemotePlan plan = prepare_remote_hosts(table.hosts(), ranks_per_host, local, ro);
  const JobNetwork network =
      choose_job_network(table, plan, spec, ro.horarun_path, options.start_timeout);
  if (options.verbose && network.reach) {
    fmt::print("network: reachability measured by the probes:\n{}",
               format_reachability_table(network.probed, *network.reach));
  }
  if (options.dry_run || options.verbose) {
    fmt::print("{}", describe_choice(network.choice));
    std::fflush(stdout);
  }
  if (options.dry_run) return 0;

  SupervisorConfig config;
  config.command = options.command;
  config.cwd = current_directory();
  config.verbose = options.verbose;
  config.facts.start_timeout = options.start_timeout;
  config.facts.log_level = options.log_level;
  config.facts.tcp = options.tcp;
  config.facts.tuning = options.tuning;
  config.facts.forwarded = options.env_forward;
  config.horovod_rendezvous = options.horovod_rendezvous;
  apply_launcher_environment(gather_environment(), options, table, config.facts);
  for (const auto& [name, value] : options.env_forward) {
    if (is_contract_variable(name)) {
      launcher_log()->warn("-x {} overrides the value horarun sets for every rank", name);
    }
  }
  apply_job_network(network, table, plan, config);
  for (const auto& [index, host] : plan.hosts) {
    launcher_log()->info("{}: reaches the launcher at {}", host.target.describe(),
                         config.host_network.at(static_cast<std::size_t>(index)).rendezvous_host);
  }

  boost::asio::io_context io;
  std::map<int, RemoteHostSessions> sessions;
  for (auto& [index, host] : plan.hosts) sessions.emplace(index, std::move(host.sessions));
  // Declared before the supervisor: it owns the SSH sessions the rank processes use.
  HybridRankProcessFactory factory(io, table.hosts(), std::move(sessions), ro.horarun_path);
  // Terminal output that a slow reader has not taken yet is queued on `io` (cli/output.h).
  Output output(OutputOptions{options.prefix_timestamp, options.output_filename}, table.size(),
                STDOUT_FILENO, STDERR_FILENO, &io);
  Supervisor supervisor(io, table, std::move(config), factory, output);
  const int rc = supervisor.run();
  // Everything the ranks printed reaches the reader before horarun exits; a reader that takes
  // nothing for a minute (2 s after an interrupt: the user wants out) is given up on.
  output.flush(rc == 130 || rc == 143 ? std::chrono::milliseconds(2000) : Output::kStalledReader);
  return rc;
}

// Descriptors 0-2 closed by the caller (`horarun ... >&-`) would be taken by the first socket or
// pipe horarun opens, and rank output would be written into an SSH connection or an eventfd.
// Point each closed one at /dev/null first (open() returns the lowest free descriptor).
void ensure_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ensure_standard_descriptors();
  if (argc >= 2 && std::strcmp(argv[1], "--guard") == 0) return run_guard();
  // Hidden probe modes run on remote hosts by the preflight (cli/network_probe.h).
  if (const int rc = maybe_run_probe_mode(argc, argv); rc >= 0) return rc;

  // A closed terminal or pipe is handled where output is written; it must not kill the job.
  ::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const Options options = parse_options(args, gather_environment());
    if (!options.help_text.empty()) {
      fmt::print("{}", options.help_text);
      return 0;
    }
    if (options.check_build) return check_build();
    configure_logging(options.verbose);
    return launch(options);
  } catch (const UsageError& e) {
    fmt::print(stderr, "horarun: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "horarun: {}\n", e.what());
    return 1;
  }
}
