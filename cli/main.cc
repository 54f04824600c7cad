// horarun's entry point: gathers argv, the environment and the working directory, hands them
// to the launcher's core and maps its exceptions to exit codes (docs/errors.md).
// `horarun --guard` is the hidden guard mode every rank runs under (docs/launcher.md).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/errors.h"
#include "cli/guard.h"
#include "cli/local_host.h"
#include "cli/local_rank_process.h"
#include "cli/log.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/rank_table.h"
#include "cli/supervisor.h"

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

int launch(const Options& options) {
  const std::vector<HostSpec> hosts = host_list(options);
  const RankTable table(hosts, options.num_proc.value_or(total_slots(hosts)));

  const LocalHost local = LocalHost::discover();
  std::vector<std::string> remote;
  for (const HostSpec& h : table.hosts()) {
    if (options.force_ssh || !local.is_local(h.name)) remote.push_back(h.address_for_display());
  }
  if (options.dry_run || options.verbose) {
    fmt::print("{}", table.describe());
    for (const HostSpec& h : table.hosts()) {
      const bool is_remote =
          std::find(remote.begin(), remote.end(), h.address_for_display()) != remote.end();
      fmt::print("host {}: {} rank{}, {}, interface {}\n", h.address_for_display(), h.slots,
                 h.slots == 1 ? "" : "s", is_remote ? "over SSH" : "local",
                 is_remote ? "(chosen at launch)" : "lo");
    }
    std::fflush(stdout);
  }
  if (options.dry_run) return 0;
  if (!remote.empty()) {
    throw UsageError(fmt::format(
        "{} {} not this machine{}; this build of horarun runs ranks on this machine only "
        "(SSH launching is not available yet); use -H localhost:N",
        fmt::join(remote, ", "), remote.size() == 1 ? "is" : "are",
        options.force_ssh ? " or --force-ssh was given" : ""));
  }

  boost::asio::io_context io;
  LocalRankProcessFactory factory(io);
  Output output(OutputOptions{options.prefix_timestamp, options.output_filename}, table.size());
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
  Supervisor supervisor(io, table, std::move(config), factory, output);
  return supervisor.run();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--guard") == 0) return run_guard();

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
