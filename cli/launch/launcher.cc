#include "cli/launch/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "cli/base/errors.h"
#include "cli/elastic/supervisor.h"
#include "cli/hosts/host_list.h"
#include "cli/hosts/local_host.h"
#include "cli/hosts/rank_table.h"
#include "cli/hosts/slurm_allocation.h"
#include "cli/launch/elastic_launch.h"
#include "cli/launch/job_config.h"
#include "cli/launch/job_hosts.h"
#include "cli/launch/job_network.h"
#include "cli/network/choice.h"
#include "cli/network/spec.h"
#include "cli/options/option_file.h"
#include "cli/output/log.h"
#include "cli/output/log_sink.h"
#include "cli/output/output.h"
#include "cli/remote/command_probe.h"
#include "cli/remote/remote_hosts.h"
#include "cli/remote/slurm_agents.h"
#include "cli/spawn/agent_rank_process.h"
#include "common/duration.h"
#include "common/fd_limit.h"
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
  open_option_file("--ssh-config", path, "an ssh_config file (or /dev/null)",
                   "cannot open the file");
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

// The time of day with milliseconds, for the restart line ("14:03:07.412").
std::string time_of_day() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  const std::size_t n = std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{}.{:03}", std::string_view(buf, n), ms);
}

// Step 5 for each attempt: the job, and with --max-restarts N (torchrun's habit, for programs
// without the elastic API) the whole job again after a failure, up to N times, on the same hosts
// through the same agents (no new SSH session, no new preflight). Every attempt is a new
// Supervisor: a new rendezvous server and secret, a new MASTER_PORT, and
// TORCHELASTIC_RESTART_COUNT = the attempt. No restart when every rank exited 0, when horarun was
// interrupted (SIGINT/SIGTERM, also while a failed attempt was ending), or when a host's agent
// was lost (the job would fail there again; elastic mode goes on without it). Returns the last
// attempt's exit code (128 + the signal after an interrupt).
int run_attempts(boost::asio::io_context& io, const RankTable& table,
                 const SupervisorConfig& config, AgentRankProcessFactory& factory, Output& output,
                 int max_restarts) {
  if (max_restarts <= 0) {
    Supervisor supervisor(io, table, config, factory, output);
    return supervisor.run();
  }
  // horarun's own SIGINT/SIGTERM, heard during an attempt (with the attempt's supervisor, which
  // ends the job) and between attempts: an interrupted job is not restarted.
  int interrupted = 0;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  std::function<void()> arm = [&] {
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      if (interrupted == 0) interrupted = sig;
      arm();
    });
  };
  arm();
  // Every attempt's supervisor lives to the end of the launch: handlers it left on `io`
  // (cancelled timers, closed sockets) may run during a later attempt and must find it.
  std::vector<std::unique_ptr<Supervisor>> attempts;
  int rc = 0;
  const int total = max_restarts + 1;
  for (int attempt = 0;; ++attempt) {
    SupervisorConfig attempt_config = config;
    attempt_config.facts.restart_count = attempt;
    // Made before the check below: from here on its own signal_set hears a signal too.
    attempts.push_back(
        std::make_unique<Supervisor>(io, table, std::move(attempt_config), factory, output));
    io.restart();
    io.poll();  // a signal heard since the last attempt ended
    if (interrupted != 0) {
      output.launcher_message(
          fmt::format("interrupted by {} before attempt {} of {} started; not restarting",
                      interrupted == SIGINT ? "SIGINT" : "SIGTERM", attempt + 1, total));
      rc = 128 + interrupted;
      break;
    }
    const auto began = std::chrono::steady_clock::now();
    rc = attempts.back()->run();
    io.restart();
    io.poll();  // the signal handler, if a signal came while the attempt was ending
    if (rc == 0) break;
    if (interrupted != 0) {
      if (rc != 128 + interrupted) {
        output.launcher_message(
            fmt::format("interrupted by {} while attempt {} of {} was ending; not restarting",
                        interrupted == SIGINT ? "SIGINT" : "SIGTERM", attempt + 1, total));
      }
      rc = 128 + interrupted;
      break;
    }
    if (attempt + 1 == total) {
      output.launcher_message(
          fmt::format("attempt {} of {} failed; no restart left (--max-restarts {})", attempt + 1,
                      total, max_restarts));
      break;
    }
    const std::map<std::string, std::string> lost = factory.lost_hosts();
    if (!lost.empty()) {
      std::vector<std::string> named;
      std::vector<std::string> why;
      for (const auto& [host, error] : lost) {
        named.push_back(host);
        why.push_back(error);
      }
      output.launcher_message(fmt::format(
          "not restarting (--max-restarts {}): {} {} not available ({}); a restart runs the whole "
          "job on the same hosts, and elastic mode (--min-np, --host-discovery-script) goes on "
          "without a lost host",
          max_restarts, fmt::join(named, ", "), named.size() == 1 ? "is" : "are",
          fmt::join(why, "; ")));
      break;
    }
    const auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - began);
    output.launcher_message(fmt::format(
        "restarting the job: attempt {} of {} starts at {}; attempt {} ended after {}: {}",
        attempt + 2, total, time_of_day(), attempt + 1, hora::format_duration(ran),
        attempts.back()->cause()));
  }
  signals.cancel();
  return rc;
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
  if (options.dry_run || options.verbose || options.display_map) {
    hora::write_all(ctx.stdout_fd, describe_hosts(table, local, remote, ro, options.slurm));
  }

  // Steps 3 and 4: preflight every remote host, then choose the interfaces. --dry-run does both,
  // so it shows what a launch would use, and stops before any rank starts.
  RemotePlan plan = options.slurm ? prepare_slurm_hosts(table.hosts(), local, ro.horarun_path,
                                                        ro.command_check, options.start_timeout)
                                  : prepare_remote_hosts(remote, ro);
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
  Output output(OutputOptions{options.prefix_timestamp, options.output_filename, options.tag_output,
                              options.merge_stderr},
                table.size(), ctx.stdout_fd, ctx.stderr_fd, &io);
  // horarun's own log lines take the same path from here on: a stalled stderr reader cannot
  // block the event loop in a write.
  const LogSinkAttachment log_to_output(output);
  const int rc = run_attempts(io, table, config, factory, output, options.max_restarts);
  // Everything the ranks printed reaches the reader before horarun exits; a reader that takes
  // nothing for a minute (2 s after an interrupt: the user wants out) is given up on.
  output.flush(rc == 130 || rc == 143 ? std::chrono::milliseconds(2000) : Output::kStalledReader);
  return rc;
}

// The soft open-file limit up to the hard one: the launcher holds a connection or two per rank
// and whatever strangers open to the rendezvous port (a port scan must not exhaust it). Said at the
// default level only when it matters: the limit stays low.
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
  // -wdir/--wdir: the ranks' working directory, relative to horarun's.
  LaunchContext job = ctx;
  if (!options.working_directory.empty()) {
    job.cwd = options.working_directory.front() == '/' ? options.working_directory
                                                       : ctx.cwd + "/" + options.working_directory;
  }
  if (options.elastic.elastic()) {
    check_not_srun_task(ctx.env);  // a discovery script's job never reads the host list
    return launch_elastic(options, job);
  }
  return launch(options, job);
}

}  // namespace hora::cli
