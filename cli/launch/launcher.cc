#include "cli/launch/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>

#include "cli/base/errors.h"
#include "cli/hosts/host_list.h"
#include "cli/hosts/local_host.h"
#include "cli/hosts/rank_table.h"
#include "cli/launch/elastic_launch.h"
#include "cli/launch/job_hosts.h"
#include "cli/launch/job_network.h"
#include "cli/network/choice.h"
#include "cli/network/spec.h"
#include "cli/output/log.h"
#include "cli/output/log_sink.h"
#include "cli/output/output.h"
#include "cli/remote/command_probe.h"
#include "cli/remote/remote_hosts.h"
#include "cli/remote/slurm_agents.h"
#include "cli/spawn/agent_rank_process.h"
#include "cli/spawn/env_forwarding.h"
#include "cli/spawn/supervisor.h"
#include "common/fd_limit.h"
#include "common/job_environment.h"
#include "common/unique_fd.h"
#include "common/write_all.h"
#include "ssh/known_hosts.h"

namespace hora::cli {
namespace {

// Below this soft open-file limit a failure to raise it is worth a warning.
constexpr std::uint64_t kFewDescriptors = 4096;

std::string check_build_text() {
#ifdef HORA_BUILT_WITH_NCCL
  const bool nccl = true;
#else
  const bool nccl = false;
#endif
#ifdef HORA_BUILT_WITH_TORCH
  const bool torch = true;
#else
  const bool torch = false;
#endif
  return fmt::format(
      "hora {}: available backends:\n  [X] Gloo (CPU collectives)\n  [{}] NCCL (GPU "
      "collectives)\navailable frameworks:\n  [{}] PyTorch (hora.torch)\n",
      HORA_VERSION, nccl ? "X" : " ", torch ? "X" : " ");
}

// This binary's absolute path: the default --horarun-path (the same install on every host).
std::string self_path() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) {
    throw Error(
        fmt::format("cannot read /proc/self/exe ({}); give --horarun-path", std::strerror(errno)));
  }
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

// --ssh-config is checked even when every host is local (it is read only for remote ones): a
// directory, a device or a FIFO is a mistake worth saying at once, like a bad --hostfile.
void check_ssh_config_file(const std::string& path) {
  if (path.empty() || path == "/dev/null") return;
  hora::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) {
    throw UsageError(fmt::format("--ssh-config {}: cannot open the file ({}); check the path", path,
                                 std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw UsageError(fmt::format(
        "--ssh-config {}: is {}, not a regular file; give an ssh_config file (or /dev/null)", path,
        S_ISDIR(st.st_mode)    ? "a directory"
        : S_ISFIFO(st.st_mode) ? "a FIFO"
        : S_ISSOCK(st.st_mode) ? "a socket"
                               : "a device"));
  }
}

// `remote`: resolve_remote_hosts()'s answer (empty under Slurm).
std::string describe_hosts(const RankTable& table, const LocalHost& local,
                           const std::map<int, hora::ssh::Target>& remote, const RemoteOptions& ro,
                           bool slurm) {
  std::string out = table.describe();
  // Which host's agent reaches each relayed host (the fan-out tree).
  std::vector<int> indexes;
  for (const auto& [index, target] : remote) indexes.push_back(index);
  std::map<int, std::string> via;
  for (const auto& [parent, children] : plan_fanout(indexes, ro.ssh_fanout)) {
    for (int child : children) via[child] = remote.at(parent).alias;
  }
  for (std::size_t i = 0; i < table.hosts().size(); ++i) {
    const HostSpec& h = table.hosts()[i];
    const auto it = remote.find(static_cast<int>(i));
    std::string how = "local";
    if (slurm && !local.is_local(h.name)) how = "through srun";
    if (it != remote.end()) how = "over SSH to " + it->second.describe();
    if (const auto v = via.find(static_cast<int>(i)); v != via.end()) {
      how += " from " + v->second + "'s agent";
    }
    out += fmt::format("host {}: {} rank{}, {}\n", h.address_for_display(), h.slots,
                       h.slots == 1 ? "" : "s", how);
  }
  return out;
}

// The stall settings the ranks will see: -x NAME=V, else the flags (tuning), else horarun's own
// environment, which local ranks inherit.
SupervisorConfig::StallCheck stall_check(const JobFacts& facts, const Environment& env) {
  auto setting = [&](const char* name) -> std::optional<double> {
    for (const EnvBlock* block : {&facts.forwarded, &facts.tuning}) {
      for (const auto& [k, v] : *block) {
        if (k == name) return std::strtod(v.c_str(), nullptr);
      }
    }
    if (const auto it = env.find(name); it != env.end()) {
      return std::strtod(it->second.c_str(), nullptr);
    }
    return std::nullopt;
  };
  SupervisorConfig::StallCheck stall;
  stall.enabled = setting(job_env::kStallCheckDisable).value_or(0) == 0;
  stall.warning_seconds = setting(job_env::kStallCheckSeconds).value_or(stall.warning_seconds);
  stall.shutdown_seconds = setting(job_env::kStallShutdownSeconds).value_or(0);
  if (!(stall.warning_seconds > 0)) stall.enabled = false;
  return stall;
}

// Step 5: what the supervisor needs besides the rank table, from the options and the network.
SupervisorConfig supervisor_config(const Options& options, const LaunchContext& ctx,
                                   const RankTable& table, const JobNetwork& network,
                                   const RemotePlan& plan) {
  SupervisorConfig config;
  config.command = options.command;
  config.cwd = ctx.cwd;
  config.verbose = options.verbose;
  config.facts.start_timeout = options.start_timeout;
  config.facts.log_level = options.log_level;
  config.facts.tcp = options.tcp;
  config.facts.tuning = options.tuning;
  config.facts.forwarded = options.env_forward;
  config.horovod_rendezvous = options.horovod_rendezvous;
  apply_launcher_environment(ctx.env, options, table, config.facts);
  config.stall = stall_check(config.facts, ctx.env);
  for (const auto& [name, value] : options.env_forward) {
    if (is_contract_variable(name)) {
      launcher_log()->warn("-x {} overrides the value horarun sets for every rank", name);
    }
  }
  apply_job_network(network, table, plan, config);
  for (const auto& [index, host] : plan.hosts) {
    launcher_log()->info("{}: reaches the launcher at {}", host.describe(),
                         config.host_network.at(static_cast<std::size_t>(index)).rendezvous_host);
  }
  return config;
}

int launch(const Options& options, const LaunchContext& ctx) {
  const JobHosts resolved = resolve_job_hosts(options, ctx.env);  // step 2
  const RankTable& table = resolved.table;

  const LocalHost local = LocalHost::discover();
  const RemoteOptions ro = remote_options(options, ctx);
  // Which hosts are remote and how SSH reaches them (ssh_config), resolved once for the launch.
  const std::map<int, hora::ssh::Target> remote =
      options.slurm ? std::map<int, hora::ssh::Target>()
                    : resolve_remote_hosts(table.hosts(), local, ro);
  if (!options.slurm) check_local_host_once(table.hosts(), remote);
  if (options.dry_run || options.verbose) {
    hora::write_all(ctx.stdout_fd, describe_hosts(table, local, remote, ro, options.slurm));
  }

  // Steps 3 and 4: preflight every remote host, then choose the interfaces. --dry-run does both,
  // so it shows what a launch would use, and stops before any rank starts.
  RemotePlan plan = options.slurm ? prepare_slurm_hosts(table.hosts(), local, ro.horarun_path,
                                                        ro.command_check, options.start_timeout)
                                  : prepare_remote_hosts(table.hosts(), remote, ro);
  const JobNetwork network = choose_job_network(table, plan, resolved.spec, options.start_timeout);
  if (options.verbose && network.reach) {
    hora::write_all(ctx.stdout_fd, "network: reachability measured by the probes:\n" +
                                       format_reachability_table(network.probed, *network.reach));
  }
  if (options.dry_run || options.verbose)
    hora::write_all(ctx.stdout_fd, describe_choice(network.choice));
  if (options.dry_run) return 0;

  // Step 5: rendezvous, spawn, supervise.
  SupervisorConfig config = supervisor_config(options, ctx, table, network, plan);
  boost::asio::io_context io;
  // Declared before the supervisor: it owns the SSH sessions and agents the rank processes use.
  AgentRankProcessFactory factory(io, table.hosts(), std::move(plan.hosts), ctx.local_guard);
  // Terminal output that a slow reader has not taken yet is queued on `io` (cli/output/output.h).
  Output output(OutputOptions{options.prefix_timestamp, options.output_filename}, table.size(),
                ctx.stdout_fd, ctx.stderr_fd, &io);
  // horarun's own log lines take the same path from here on: a stalled stderr reader cannot
  // block the event loop in a write (issue 15 item 1).
  const LogSinkAttachment log_to_output(output);
  Supervisor supervisor(io, table, std::move(config), factory, output);
  const int rc = supervisor.run();
  // Everything the ranks printed reaches the reader before horarun exits; a reader that takes
  // nothing for a minute (2 s after an interrupt: the user wants out) is given up on.
  output.flush(rc == 130 || rc == 143 ? std::chrono::milliseconds(2000) : Output::kStalledReader);
  return rc;
}

// The soft open-file limit up to the hard one: the launcher holds a connection or two per rank
// and whatever strangers open to the rendezvous port (issue 15 item 2). Said at the default
// level only when it matters: the limit stays low.
void raise_open_file_limit() {
  const hora::FdLimit limit = hora::raise_fd_limit();
  if (limit.error.empty()) {
    if (limit.soft != limit.soft_before) {
      launcher_log()->info("raised the open-file limit from {} to {}", limit.soft_before,
                           limit.soft);
    }
  } else if (limit.soft < kFewDescriptors) {
    launcher_log()->warn(
        "cannot raise the open-file limit ({}) from {}: a large job or many "
        "connections to the rendezvous port may run out of descriptors; raise "
        "it with `ulimit -n`",
        limit.error, limit.soft);
  }
}

}  // namespace

RemoteOptions remote_options(const Options& options, const LaunchContext& ctx) {
  RemoteOptions ro;
  ro.force_ssh = options.force_ssh;
  check_ssh_config_file(options.ssh_config);
  if (!options.ssh_config.empty()) ro.config.file = options.ssh_config;
  ro.overrides.port = options.ssh_port;
  if (!options.ssh_identity_file.empty()) {
    ro.overrides.identity_files.push_back(options.ssh_identity_file);
  }
  if (options.ssh_strict_host_key_checking_given) {
    ro.overrides.host_key_policy =
        hora::ssh::parse_host_key_policy(options.ssh_strict_host_key_checking,
                                         "--ssh-strict-host-key-checking");
  }
  ro.connect = hora::ssh::ConnectOptions::from_environment();
  ro.horarun_path = options.horarun_path.empty() ? self_path() : options.horarun_path;
  ro.preflight_timeout = options.start_timeout;
  ro.ssh_fanout = options.ssh_fanout;
  ro.command_check = command_check_for(options, ctx.env, ctx.cwd);
  return ro;
}

int run_launcher(const LaunchContext& ctx) {
  // A guard that exits just before its `terminate` line is written, or a closed terminal, gives
  // EPIPE, handled where written; it must not kill the launcher (main.cc does the same, and
  // launcher_test calls this directly).
  ::signal(SIGPIPE, SIG_IGN);
  const Options options = parse_options(ctx.args, ctx.env);  // step 1
  if (!options.help_text.empty()) {
    hora::write_all(ctx.stdout_fd, options.help_text);
    return 0;
  }
  if (options.check_build) {
    hora::write_all(ctx.stdout_fd, check_build_text());
    return 0;
  }
  configure_logging(options.verbose);
  raise_open_file_limit();
  if (options.elastic.elastic()) return launch_elastic(options, ctx);
  return launch(options, ctx);
}

}  // namespace hora::cli
