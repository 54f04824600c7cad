// horarun's entry point: gathers argv, the environment and the working directory, hands them
// to the launcher's core and maps its exceptions to exit codes (docs/errors.md).
// `horarun --guard` is the hidden guard mode every rank runs under (docs/launcher.md).
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

#include "cli/errors.h"
#include "cli/guard.h"
#include "cli/local_host.h"
#include "cli/log.h"
#include "cli/network_choice.h"
#include "cli/network_discovery.h"
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
  return ro;
}

int launch(const Options& options) {
  const std::vector<HostSpec> hosts = host_list(options);
  const RankTable table(hosts, options.num_proc.value_or(total_slots(hosts)));

  const LocalHost local = LocalHost::discover();
  const RemoteOptions ro = remote_options(options);
  if (options.dry_run || options.verbose) {
    const auto remote = resolve_remote_hosts(table.hosts(), local, ro);
    fmt::print("{}", table.describe());
    for (std::size_t i = 0; i < table.hosts().size(); ++i) {
      const HostSpec& h = table.hosts()[i];
      const auto it = remote.find(static_cast<int>(i));
      fmt::print("host {}: {} rank{}, {}, interface {}\n", h.address_for_display(), h.slots,
                 h.slots == 1 ? "" : "s",
                 it != remote.end() ? "over SSH to " + it->second.describe() : "local",
                 it != remote.end() ? "(chosen at launch)" : (remote.empty() ? "lo" : "(by route)"));
    }
    std::fflush(stdout);
  }
  if (options.dry_run) return 0;

  std::vector<int> ranks_per_host(table.hosts().size(), 0);
  for (int r = 0; r < table.size(); ++r) ++ranks_per_host.at(table.rank(r).host_index);
  RemotePlan plan = prepare_remote_hosts(table.hosts(), ranks_per_host, local, ro);

  SupervisorConfig config;
  config.command = options.command;
  config.cwd = current_directory();
  config.verbose = options.verbose;
  config.facts.start_timeout = options.start_timeout;
  config.facts.log_level = options.log_level;
  config.facts.tcp = options.tcp;
  config.facts.tuning = options.tuning;
  config.facts.forwarded = options.env_forward;
  for (const auto& [name, value] : options.env_forward) {
    if (is_contract_variable(name)) {
      launcher_log()->warn("-x {} overrides the value horarun sets for every rank", name);
    }
  }
  // --network-interfaces: check the names on every host against its probe and give each
  // host's ranks its chosen interface. Without it, jobs whose hosts are all remote (two or
  // more) discover the interfaces with the listen/connect probes over the preflight's sessions
  // (cli/network_discovery.h). Mixed local+remote and single-remote-host jobs are not
  // discovered yet: their ranks bind by route to the rendezvous address; all-local jobs use lo.
  const NetworkSpec spec = parse_network_spec(options.network_interfaces);
  const bool discover = spec.empty() && table.hosts().size() >= 2 &&
                        plan.hosts.size() == table.hosts().size();
  std::optional<NetworkChoice> choice;
  if (!spec.empty() || discover) {
    std::vector<HostInterfaces> probed;
    for (std::size_t i = 0; i < table.hosts().size(); ++i) {
      HostInterfaces hi;
      hi.host = table.hosts()[i].name;
      const auto it = plan.hosts.find(static_cast<int>(i));
      hi.local = it == plan.hosts.end();
      if (hi.local) {
        hi.interfaces = local_interfaces();
      } else {
        hi.interfaces = parse_interfaces(it->second.probe_output, it->second.target.describe());
        hi.hint_address = it->second.host_address;
      }
      probed.push_back(std::move(hi));
    }
    std::optional<Reachability> reach;
    if (discover) {
      // One deadline for the whole discovery, inside the start timeout.
      const auto budget = std::min<std::chrono::seconds>(std::chrono::seconds(10),
                                                         options.start_timeout);
      const auto started = hora::ssh::Clock::now();
      std::vector<DiscoveryTarget> targets;
      for (std::size_t i = 0; i < table.hosts().size(); ++i) {
        RemoteHost& rh = plan.hosts.at(static_cast<int>(i));
        targets.push_back(DiscoveryTarget{probed[i].host, rh.sessions.sessions.at(0).get()});
      }
      reach = discover_reachability(targets, ro.horarun_path, started + budget);
      launcher_log()->info("network discovery on {} hosts took {} ms", targets.size(),
                           std::chrono::duration_cast<std::chrono::milliseconds>(
                               hora::ssh::Clock::now() - started)
                               .count());
      if (options.verbose) {
        fmt::print("{}", format_reachability_table(probed, *reach));
        std::fflush(stdout);
      }
    }
    choice = choose_interfaces(probed, spec, reach ? &*reach : nullptr);
    if (options.verbose) {
      fmt::print("{}", describe_choice(*choice));
      std::fflush(stdout);
    }
  }
  auto iface_of = [&](std::size_t i, const std::string& fallback) {
    return choice ? choice->hosts.at(i).iface : fallback;
  };
  if (!plan.any() && choice) config.iface = iface_of(0, config.iface);

  if (plan.any()) {
    // Remote ranks must reach the rendezvous server: it listens on every address, and each host
    // is told the address of this machine that its SSH connection came from. Local ranks use the
    // address the first remote host sees, so their Gloo devices bind an address peers can reach.
    config.bind_address = "0.0.0.0";
    const std::string launcher_address = plan.hosts.begin()->second.launcher_address;
    for (std::size_t i = 0; i < table.hosts().size(); ++i) {
      const auto it = plan.hosts.find(static_cast<int>(i));
      HostNetwork net;
      net.rendezvous_host = it != plan.hosts.end() ? it->second.launcher_address : launcher_address;
      // Without --network-interfaces libhora binds the source address of its route to the
      // rendezvous server (runtime/gloo/device.cc); the iface engineer's choice replaces this.
      net.iface = iface_of(i, "");
      config.host_network.push_back(std::move(net));
    }
    const int host0 = table.rank(0).host_index;
    const auto it0 = plan.hosts.find(host0);
    config.master_addr = it0 != plan.hosts.end() ? it0->second.host_address : launcher_address;
    if (it0 != plan.hosts.end()) config.master_port_probe_address = "0.0.0.0";
    for (const auto& [index, host] : plan.hosts) {
      launcher_log()->info("{}: reaches the launcher at {}", host.target.describe(),
                           host.launcher_address);
    }
  }

  boost::asio::io_context io;
  std::map<int, RemoteHostSessions> sessions;
  for (auto& [index, host] : plan.hosts) sessions.emplace(index, std::move(host.sessions));
  // Declared before the supervisor: it owns the SSH sessions the rank processes use.
  HybridRankProcessFactory factory(io, table.hosts(), std::move(sessions), ro.horarun_path);
  Output output(OutputOptions{options.prefix_timestamp, options.output_filename}, table.size());
  Supervisor supervisor(io, table, std::move(config), factory, output);
  return supervisor.run();
}

}  // namespace

int main(int argc, char** argv) {
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
