#include "cli/options/options.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/common.h>
#include <CLI/CLI.hpp>

#include "cli/base/errors.h"
#include "cli/hosts/host_list.h"
#include "cli/hosts/rank_table.h"
#include "cli/options/horovod_flags.h"
#include "cli/options/number_range.h"
#include "cli/options/option_mistakes.h"
#include "cli/options/range_validator.h"
#include "cli/options/tuning_flags.h"
#include "cli/output/log.h"
#include "common/job_environment.h"
#include "common/text.h"

namespace hora::cli {
namespace {

constexpr std::string_view kUsageHint = "run 'horarun --help' for the options";

// What CLI11 fills that is not yet an Options field: values converted or checked together
// before they become one (seconds, levels, lists, mpirun's and torchrun's habits). A flag whose
// value is the field's is bound straight to Options in make_app(), so it is declared once there.
struct RawOptions {
  std::string launcher = "auto";
  std::optional<int> start_timeout;
  bool prefix_timestamp = false;
  std::string log_level;
  std::string strict_host_key_checking;  // empty: not given
  std::vector<std::string> network_interfaces_lists;
  std::vector<std::string> network_interface;
  std::vector<std::string> env;
  std::string bind_to;  // --bind-to; empty: not given
  std::string timeline_filename;
  bool timeline_mark_cycles = false;
  // kTuningFlags' values, in the table's order.
  std::array<std::optional<double>, kTuningFlags.size()> tuning_numbers;
  bool no_stall_check = false;
  // Elastic flags that ElasticOptions holds in another form.
  std::optional<int> min_np;
  std::optional<int> elastic_timeout;
  std::vector<int> cooldown_range;  // two values when given
  HorovodRawFlags horovod;
  // mpirun's and torchrun's habits (docs/launcher.md, "Habits from mpirun and torchrun").
  std::optional<int> nproc_per_node;  // torchrun --nproc-per-node
  std::optional<int> nnodes;          // torchrun --nnodes
  bool standalone = false;            // torchrun --standalone
  bool allow_run_as_root = false;     // mpirun --allow-run-as-root
  std::vector<std::string> mca;       // mpirun --mca KEY VALUE
  std::optional<int> npernode;        // mpirun -N/-npernode
  std::string map_by;                 // mpirun --map-by; empty: not given
  bool timestamp_output = false;
};

// Every number is checked where it is parsed (number_range.h; the tuning flags' ranges in
// tuning_flags.h), so a mistake names the flag and never reaches the ranks as an overflowed
// variable.
constexpr int kMaxResets = 1'000'000;  // --reset-limit, --max-restarts

// CLI11 validators; CLI11 puts the flag's name in front of the message ("--cycle-time-ms: ...").
CLI::Validator not_empty(const char* what) {
  return CLI::Validator(
      [what](std::string& value) -> std::string {
        if (!value.empty()) return {};
        return fmt::format("the value is empty; give {}", what);
      },
      "", "not empty");
}

// An integer in [lo, hi]; `what` says what the number counts.
CLI::Validator integer_in(long long lo, long long hi, const char* what) {
  return in_range({static_cast<double>(lo), static_cast<double>(hi), false, true, what});
}

// A timeout in whole seconds from horovodrun's variable `name` (1 to kMaxSeconds); nullopt when
// unset or empty. `flag` is the option that overrides it, named in the error.
std::optional<std::chrono::seconds> seconds_from_env(const Environment& env, const char* name,
                                                     const char* flag) {
  const auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  std::string error;
  const auto seconds =
      parse_in_range(it->second, {1, kMaxSeconds, false, true, "a number of seconds"}, &error);
  if (!seconds)
    throw UsageError(fmt::format("{}={}; fix or unset it, or pass {}", name, error, flag));
  return std::chrono::seconds(static_cast<long long>(*seconds));
}

// horovodrun's elastic flags (docs/elastic.md) and torchrun's --max-restarts; apply_elastic()
// checks them together.
void add_elastic_flags(CLI::App& app, RawOptions& raw, Options& options) {
  app.add_option("--min-np,--min-num-proc", raw.min_np,
                 "elastic: the fewest ranks the job runs with; below it, wait up to "
                 "--elastic-timeout for hosts (default -np)")
      ->check(integer_in(1, RankTable::kMaxRanks, "a number of ranks"));
  app.add_option("--max-np,--max-num-proc", options.elastic.max_np,
                 "elastic: the most ranks; slots beyond it are not used (default: no bound)")
      ->check(integer_in(1, RankTable::kMaxRanks, "a number of ranks"));
  app.add_option("--host-discovery-script", options.elastic.discovery_script,
                 "elastic: a program printing the available hosts, one 'host:slots' (or 'host') "
                 "a line; run at start and about once a second. Not with -H/--hostfile")
      ->check(not_empty("the path of a program that prints the hosts"));
  app.add_option("--slots-per-host", options.elastic.slots_per_host,
                 "elastic: the slots of a host the discovery script prints without ':slots'")
      ->check(integer_in(1, HostSpec::kMaxSlots, "a number of slots"));
  app.add_option("--elastic-timeout", raw.elastic_timeout,
                 "elastic: seconds to wait for --min-np slots (default 600, or "
                 "HOROVOD_ELASTIC_TIMEOUT)")
      ->check(integer_in(1, static_cast<long long>(kMaxSeconds), "a number of seconds"));
  app.add_option("--reset-limit", options.elastic.reset_limit,
                 "elastic: the most resets (scaling up or down); one more ends the job")
      ->check(integer_in(0, kMaxResets, "a number of resets"));
  app.add_option("--blacklist-cooldown-range", raw.cooldown_range,
                 "MIN MAX: elastic: a failed host may come back after a cooldown in [MIN, MAX] "
                 "seconds, longer at each failure (default: never)")
      ->expected(2)
      ->allow_extra_args(false)
      ->check(integer_in(ElasticOptions::kMinCooldownSeconds, ElasticOptions::kMaxCooldownSeconds,
                         "a number of seconds"));
  app.add_flag("--horovod-elastic", options.elastic.horovod,
               "elastic: serve Horovod's elastic rendezvous for programs of Horovod's own "
               "package (import horovod.torch; hvd.elastic.run). Unauthenticated and, with "
               "--host-discovery-script, on every address, as horovodrun's");
  app.add_option("--max-restarts", options.max_restarts,
                 "restart the whole job up to N times when it fails (torchrun's; default 0)")
      ->check(integer_in(0, kMaxResets, "a number of restarts"));
}

// mpirun's output, placement and directory options (docs/launcher.md, "Habits from mpirun and
// torchrun"); apply_habits() turns them into hora's.
void add_mpirun_output_flags(CLI::App& app, RawOptions& raw, Options& options) {
  app.add_flag("--tag-output", options.tag_output,
               "mpirun's: tag each line [1,RANK]<stdout>: as Open MPI does (hora's own tag is "
               "[RANK]<stdout>:)");
  app.add_flag("--timestamp-output", raw.timestamp_output,
               "mpirun's spelling of --prefix-output-with-timestamp");
  app.add_flag("--merge-stderr-to-stdout", options.merge_stderr,
               "mpirun's: write the ranks' stderr lines to horarun's stdout (still tagged "
               "<stderr>)");
  app.add_option("--wdir", options.working_directory,
                 "-wdir DIR: mpirun's: the ranks' working directory (default: horarun's)")
      ->check(not_empty("a directory, or leave --wdir out"));
  app.add_option("-N,--npernode", raw.npernode,
                 "-npernode N: mpirun's ranks per host; as --nproc-per-node")
      ->check(integer_in(1, HostSpec::kMaxSlots, "a number of ranks per host"));
  app.add_flag("--oversubscribe", options.oversubscribe,
               "mpirun's: accepted without -H/--hostfile (the one host has -np slots); with them, "
               "refused: raise the slots (-H host:N)");
  app.add_flag("--display-map,--report-bindings", options.display_map,
               "mpirun's: print the rank table (hosts, ranks, binding) before the job starts");
  app.add_option("--map-by", raw.map_by,
                 "mpirun's: slot or core (each host's local ranks in order), socket or numa "
                 "(round-robin over the host's sockets or NUMA nodes; binds to them unless "
                 "--bind-to says otherwise) (HORA_MAP_BY)");
}

std::unique_ptr<CLI::App> make_app(RawOptions& raw, Options& options) {
  auto app = std::make_unique<CLI::App>(
      "horarun: start a hora (Horovod-compatible) job.\n"
      "  horarun -np 4 -H localhost:4 ./train [args...]\n"
      "Single-dash long options as in horovodrun: -np N, -cb, -prefix-timestamp.",
      "horarun");
  // The first argument that is neither an option nor an option's value starts the user's
  // command (as does `--`): CLI11 leaves it and everything after it in remaining().
  app->prefix_command();
  // The repeatable options (vectors) take one value per occurrence, so `-x A=1 ./train` leaves
  // ./train to the command: allow_extra_args(false) on each.
  app->set_help_flag("-h,--help", "Print this help and exit");
  app->add_option("--num-proc,-n,--np", options.num_proc,
                  "-np N: number of ranks (default: the slots of -H/--hostfile)")
      ->check(integer_in(1, RankTable::kMaxRanks, "a number of ranks (-np)"));
  app->add_option("-H,--hosts,--host", options.hosts,
                  "host:slots,... (also host, user@host:slots, [ipv6]:slots); "
                  "default localhost:<np>")
      ->check(not_empty("the hosts, e.g. -H localhost:4, or leave -H out"));
  app->add_option("--hostfile,--machinefile", options.hostfile, "file of 'host slots=N' lines")
      ->check(not_empty("the path of a file of 'host slots=N' lines, or leave --hostfile out"));
  app->add_option("--start-timeout", raw.start_timeout,
                  "seconds for every rank to reach hora::init() (default 30, or "
                  "HOROVOD_START_TIMEOUT)")
      ->check(integer_in(1, static_cast<long long>(kMaxSeconds), "a number of seconds"));
  app->add_flag("--verbose", options.verbose, "print the rank table and the launch steps");
  app->add_option("--output-filename", options.output_filename,
                  "also write each rank's output to DIR/rank.N/stdout and stderr")
      ->check(not_empty("a directory for the ranks' output files, or leave --output-filename out"));
  app->add_flag("--prefix-output-with-timestamp", raw.prefix_timestamp,
                "-prefix-timestamp: prefix each output line with the time it was received");
  app->add_option("--log-level", raw.log_level,
                  "trace, debug, info, warning, error or fatal (sets HORA_LOG_LEVEL in every "
                  "rank)");
  app->add_flag("--check-build", options.check_build,
                "-cb: print which backends were built and exit");
  app->add_flag("--dry-run", options.dry_run,
                "check the hosts, print the rank table and each host's interface, and exit "
                "without starting ranks");
  app->add_option("-p,--ssh-port", options.ssh_port, "SSH port of every remote host")
      ->check(integer_in(1, 65535, "a port"));
  app->add_option("-i,--ssh-identity-file", options.ssh_identity_file, "SSH private key file");
  app->add_option("--ssh-config", options.ssh_config, "ssh_config file (default ~/.ssh/config)");
  app->add_option("--ssh-fanout", options.ssh_fanout,
                  "past this many remote hosts, connect to this many and let their agents reach "
                  "the others over SSH (a tree; default 64; 0: connect to every host)")
      ->check(integer_in(0, 100000, "a number of hosts"));
  app->add_option("--ssh-strict-host-key-checking", raw.strict_host_key_checking,
                  "yes, accept-new (default) or no");
  app->add_option("--network-interfaces", raw.network_interfaces_lists,
                  "comma-separated interfaces for the job's traffic")
      ->allow_extra_args(false);
  app->add_option("--network-interface", raw.network_interface,
                  "an interface for the job's traffic (repeatable)")
      ->allow_extra_args(false);
  app->add_option("-x,--env", raw.env,
                  "NAME[=VALUE]: set or forward a variable to every rank (repeatable)")
      ->allow_extra_args(false);
  app->add_flag("--tcp", options.tcp, "TCP only: sets NCCL_IB_DISABLE=1 in every rank");
  app->add_option("--bind-to", raw.bind_to,
                  "core: bind each rank to an equal share of its host's CPUs (one CPU each when "
                  "ranks outnumber them); socket, numa: to all CPUs of its socket or NUMA node, "
                  "placed as mpirun places them; none (default): no binding (HORA_BIND_TO)");
  app->add_flag("--force-ssh", options.force_ssh, "use SSH even for hosts that are this machine");
  app->add_option("--launcher", raw.launcher,
                  "how agents start on remote hosts: ssh, slurm (srun inside an allocation) or "
                  "auto (slurm inside an allocation without -H/--hostfile; default)")
      ->check(CLI::IsMember({"auto", "ssh", "slurm"}));
  app->add_option("--horarun-path", options.horarun_path,
                  "path of horarun on the remote hosts (default: this binary's path)");
  app->add_option("--timeline-filename", raw.timeline_filename,
                  "write a Chrome trace of the collectives (HORA_TIMELINE)");
  app->add_flag("--timeline-mark-cycles", raw.timeline_mark_cycles,
                "mark engine cycles in the timeline (HORA_TIMELINE_MARK_CYCLES)");
  for (std::size_t i = 0; i < kTuningFlags.size(); ++i) {
    const TuningFlag& f = kTuningFlags[i];
    app->add_option(f.flag, raw.tuning_numbers[i], f.help)->check(in_range(f.range));
  }
  app->add_flag("--no-stall-check", raw.no_stall_check,
                "disable the stall check (HORA_STALL_CHECK_DISABLE=1)");
  add_elastic_flags(*app, raw, options);
  add_horovod_flags(*app, raw.horovod);
  app->add_option("--nproc-per-node,--nproc_per_node", raw.nproc_per_node,
                  "torchrun's: ranks per host; -np is this times --nnodes (or the -H hosts)")
      ->check(integer_in(1, HostSpec::kMaxSlots, "a number of ranks per host"));
  app->add_option("--nnodes", raw.nnodes, "torchrun's: the number of hosts (1 without -H)")
      ->check(integer_in(1, RankTable::kMaxRanks, "a number of hosts"));
  app->add_flag("--standalone", raw.standalone,
                "torchrun's: one host, the rendezvous in the launcher (what horarun always does)");
  app->add_flag("--allow-run-as-root", raw.allow_run_as_root,
                "mpirun's: accepted and ignored (horarun runs as root without it)");
  app->add_option("--mca", raw.mca, "KEY VALUE: mpirun's: accepted and ignored (no Open MPI)")
      ->expected(2)
      ->allow_extra_args(false);
  add_mpirun_output_flags(*app, raw, options);
  return app;
}

// horovodrun's single-dash long options, which CLI11 cannot declare, as their long forms;
// any other argument unchanged.
std::string rewrite_single_dash(const std::string& arg) {
  if (auto horovod = rewrite_horovod_single_dash(arg)) return *horovod;
  if (arg == "-cb") return "--check-build";
  if (arg == "-prefix-timestamp") return "--prefix-output-with-timestamp";
  if (arg == "-np") return "--num-proc";
  if (arg == "-machinefile" || arg == "-hostfile") return "--hostfile";  // mpirun's spellings
  // mpirun's other single-dash long options.
  static constexpr std::array<std::string_view, 9> kMpirunLong = {
      "-wdir",        "-npernode",         "-oversubscribe",          "-tag-output",
      "-display-map", "-timestamp-output", "-merge-stderr-to-stdout", "-report-bindings",
      "-bind-to"};
  for (std::string_view name : kMpirunLong) {
    if (arg == name) return "-" + arg;
  }
  if (arg.rfind("-np=", 0) == 0) return "--num-proc=" + arg.substr(4);
  if (arg.rfind("-np", 0) == 0 && arg.size() > 3 &&
      std::all_of(arg.begin() + 3, arg.end(), [](char c) { return std::isdigit(c) != 0; })) {
    return "--num-proc=" + arg.substr(3);  // argparse accepts -np4
  }
  return arg;
}

// The arguments as CLI11 is given them: single-dash long options rewritten, and `--name=` split
// into `--name` and an empty value (CLI11 would take the next argument as the value instead).
// `origin[i]` is the index in `args` that rewritten argument i came from: the command is taken
// from the original arguments, so no rewrite ever reaches it.
struct Rewritten {
  std::vector<std::string> args;
  std::vector<std::size_t> origin;
};

Rewritten rewrite(const std::vector<std::string>& args) {
  Rewritten out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = rewrite_single_dash(args[i]);
    if (arg.size() > 3 && arg.rfind("--", 0) == 0 && arg.find('=') == arg.size() - 1) {
      arg.pop_back();
      out.args.push_back(std::move(arg));
      out.origin.push_back(i);
      arg.clear();
    }
    out.args.push_back(std::move(arg));
    out.origin.push_back(i);
  }
  return out;
}

// mpirun's and torchrun's spellings that are not plain aliases (docs/launcher.md).
void apply_habits(const RawOptions& raw, Options& options) {
  const bool listed = !options.hosts.empty() || !options.hostfile.empty();
  if (raw.nnodes && *raw.nnodes > 1 && !listed) {
    throw UsageError(fmt::format(
        "--nnodes {}: horarun starts every host's ranks itself; list the {} hosts with -H "
        "host1:N,host2:N or --hostfile",
        *raw.nnodes, *raw.nnodes));
  }
  if (raw.nproc_per_node) {
    if (listed) {
      throw UsageError(
          fmt::format("--nproc-per-node {} with -H/--hostfile: give each host's slots there "
                      "(-H host1:{},host2:{}) and the total with -np",
                      *raw.nproc_per_node, *raw.nproc_per_node, *raw.nproc_per_node));
    }
    if (options.num_proc && *options.num_proc != *raw.nproc_per_node) {
      throw UsageError(
          fmt::format("-np {} and --nproc-per-node {} disagree on one host; give one of them",
                      *options.num_proc, *raw.nproc_per_node));
    }
    options.num_proc = *raw.nproc_per_node;  // one host: --nnodes is 1 here
  }
  if (raw.allow_run_as_root) {
    options.warnings.push_back(
        "--allow-run-as-root is ignored: it lets Open MPI's mpirun run as root, which horarun "
        "does without it");
  }
  if (raw.npernode) {
    if (listed) {
      throw UsageError(fmt::format(
          "-N/-npernode {} with -H/--hostfile: give each host's slots there (-H host1:{},host2:{}) "
          "and the total with -np",
          *raw.npernode, *raw.npernode, *raw.npernode));
    }
    if (options.num_proc && *options.num_proc != *raw.npernode) {
      throw UsageError(fmt::format("-np {} and -N {} disagree on one host; give one of them",
                                   *options.num_proc, *raw.npernode));
    }
    options.num_proc = *raw.npernode;
  }
  if (!raw.map_by.empty()) {
    const std::string how = lower(raw.map_by);
    if (how != "slot" && how != "core" && how != "socket" && how != "numa") {
      throw UsageError(fmt::format(
          "--map-by {}: hora maps each host's local ranks by slot or core (in order), socket or "
          "numa (round-robin over the host's sockets or NUMA nodes); use one of those or leave "
          "it out",
          raw.map_by));
    }
  }
  if (!raw.bind_to.empty()) {
    const std::string how = lower(raw.bind_to);
    if (how != "none" && how != "core" && how != "socket" && how != "numa") {
      throw UsageError(fmt::format(
          "--bind-to {}: hora binds to none (the default), core (an equal share of the host's "
          "CPUs per rank), socket or numa (all CPUs of the rank's socket or NUMA node)",
          raw.bind_to));
    }
  }
  for (std::size_t i = 0; i + 1 < raw.mca.size(); i += 2) {
    options.warnings.push_back(
        fmt::format("--mca {} {} is ignored: it sets an Open MPI parameter, and hora does not "
                    "use Open MPI (hora's own settings are its flags and -x HORA_*)",
                    raw.mca[i], raw.mca[i + 1]));
  }
}

void add_tuning(const RawOptions& raw, std::vector<std::pair<std::string, std::string>>& out) {
  // The values are in range (the validators in make_app).
  if (!raw.timeline_filename.empty()) out.emplace_back("HORA_TIMELINE", raw.timeline_filename);
  if (raw.timeline_mark_cycles) out.emplace_back("HORA_TIMELINE_MARK_CYCLES", "1");
  for (std::size_t i = 0; i < kTuningFlags.size(); ++i) {
    const TuningFlag& f = kTuningFlags[i];
    // The stall check's switch goes before its times, as it always has.
    if (raw.no_stall_check && std::string_view(f.variable) == job_env::kStallCheckSeconds) {
      out.emplace_back(job_env::kStallCheckDisable, "1");
    }
    if (raw.tuning_numbers[i])
      out.emplace_back(f.variable, tuning_value(f, *raw.tuning_numbers[i]));
  }
  if (!raw.bind_to.empty()) out.emplace_back(job_env::kBindTo, lower(raw.bind_to));
  if (!raw.map_by.empty()) out.emplace_back(job_env::kMapBy, lower(raw.map_by));
}

// One CLI11 parse: the raw values, the split, or the help text.
struct Parsed {
  RawOptions raw;
  Options options;  // the fields make_app() binds, as given
  SplitCommandLine split;
  std::string help_text;
};

Parsed parse_command_line(const std::vector<std::string>& args) {
  Parsed out;
  const Rewritten rewritten = rewrite(args);
  std::unique_ptr<CLI::App> app = make_app(out.raw, out.options);
  count_single_values(*app);
  const OptionArgs option_args{rewritten.args, rewritten.origin, args};
  try {
    std::vector<std::string> reversed(rewritten.args.rbegin(), rewritten.args.rend());
    app->parse(reversed);  // CLI11 consumes a reversed vector
  } catch (const CLI::CallForHelp&) {
    out.help_text = app->help();
    return out;
  } catch (const CLI::ParseError& e) {
    auto mistake = missing_value(*app, option_args);
    if (!mistake) mistake = repeated_option(*app, option_args, rewritten.args.size());
    throw UsageError(fmt::format("{}; {}", mistake ? *mistake : e.what(), kUsageHint));
  }
  // remaining() is the tail of the arguments from the command on (with a leading `--`), unless
  // an unknown option came first: CLI11 sets those aside and goes on parsing.
  std::vector<std::string> rest = app->remaining();
  if (!rest.empty() && rest.front() != "--" && rest.front().size() > 1 && rest.front()[0] == '-') {
    throw UsageError(
        fmt::format("unknown option {}; put the command after the options, or after "
                    "`--` if it starts with '-'; {}",
                    rest.front(), kUsageHint));
  }
  const std::size_t options_end = rewritten.args.size() - rest.size();
  // An option that takes a value, followed by another option (`--ssh-config $EMPTY -np 4`):
  // CLI11 takes the second for the first's value, and the job would fail with a message about
  // something else (here: no -np).
  for (std::size_t i = 0; i + 1 < options_end; ++i) {
    const std::string& name = rewritten.args[i];
    const std::string& next = rewritten.args[i + 1];
    if (name.size() < 2 || name[0] != '-' || next.size() < 2 || next[0] != '-') continue;
    const CLI::Option* option = app->get_option_no_throw(name);
    if (option == nullptr || option->get_expected_min() < 1) continue;
    if (app->get_option_no_throw(next) == nullptr) continue;
    throw UsageError(fmt::format(
        "{} has no value: the argument after it is {}, another option; give {} its value (a shell "
        "variable that expanded to nothing?); {}",
        args[rewritten.origin[i]], args[rewritten.origin[i + 1]], args[rewritten.origin[i]],
        kUsageHint));
  }
  if (auto repeated = repeated_option(*app, option_args, options_end)) {
    throw UsageError(fmt::format("{}; {}", *repeated, kUsageHint));
  }
  out.split.options.assign(rewritten.args.begin(),
                           rewritten.args.begin() + static_cast<std::ptrdiff_t>(options_end));
  if (!rest.empty()) {
    const std::size_t command_begin =
        rewritten.origin[options_end] + (rest.front() == "--" ? 1 : 0);
    out.split.command.assign(args.begin() + static_cast<std::ptrdiff_t>(command_begin), args.end());
  }
  return out;
}

// --launcher and the Slurm allocation: whether agents start through srun, and the hosts when
// the allocation gives them.
void apply_launcher(const std::string& launcher, const Environment& env, Options& options) {
  // A discovery script lists the hosts, as -H does.
  const bool listed = !options.hosts.empty() || !options.hostfile.empty() ||
                      !options.elastic.discovery_script.empty();
  const auto job = env.find("SLURM_JOB_ID");
  const bool in_allocation = job != env.end() && !job->second.empty();
  options.slurm = launcher == "slurm" || (launcher == "auto" && in_allocation && !listed);
  if (!options.slurm) return;
  if (!in_allocation) {
    throw UsageError(
        "--launcher slurm: SLURM_JOB_ID is not set, so this is not inside a Slurm allocation; "
        "run horarun inside salloc or an sbatch script, or use --launcher ssh");
  }
  if (options.force_ssh) {
    throw UsageError("--force-ssh and --launcher slurm contradict each other; give one");
  }
  // The allocation's hosts are read by the launch pipeline (cli/launch/job_hosts.h), once.
  options.hosts_from_allocation = !listed;
}

// The elastic flags, their values and their consistency, as horovodrun checks them
// (horovod/runner/launch.py: _is_elastic, _run_elastic; horovod/runner/elastic/discovery.py: the
// cooldown bounds); docs/elastic.md. Runs after apply_launcher (the allocation may list the hosts).
void apply_elastic(const RawOptions& raw, const Environment& env, Options& options) {
  ElasticOptions& e = options.elastic;
  if (raw.cooldown_range.size() == 2) {
    const int lo = raw.cooldown_range[0];
    const int hi = raw.cooldown_range[1];
    if (lo > hi) {
      throw UsageError(
          fmt::format("--blacklist-cooldown-range {} {}: the first number (the shortest "
                      "cooldown) is above the second (the longest); give MIN MAX",
                      lo, hi));
    }
    e.blacklist_cooldown.emplace(std::chrono::seconds(lo), std::chrono::seconds(hi));
  }
  if (raw.elastic_timeout) {
    e.elastic_timeout = std::chrono::seconds(*raw.elastic_timeout);
  } else if (auto seconds = seconds_from_env(env, "HOROVOD_ELASTIC_TIMEOUT", "--elastic-timeout")) {
    e.elastic_timeout = *seconds;
  }
  // horovodrun's _is_elastic is --min-np or a script; hora also counts --max-np
  // (docs/elastic.md), which horovodrun would silently ignore.
  e.enabled = raw.min_np || e.max_np || !e.discovery_script.empty();
  if (e.horovod && !e.enabled) {
    throw UsageError(
        "--horovod-elastic serves Horovod's elastic rendezvous, which only an elastic job "
        "(--min-np, --max-np, --host-discovery-script) has; a fixed-size job serves Horovod's "
        "rendezvous without it");
  }
  if (e.horovod && !options.horovod_rendezvous) {
    throw UsageError(
        "--horovod-elastic and --no-horovod-rendezvous both given: the first serves Horovod's "
        "rendezvous, the second turns it off; give one of them");
  }
  if (!e.enabled) return;  // the other elastic flags have no effect, as in horovodrun

  constexpr const char* kElasticFlags = "--min-np, --max-np, --host-discovery-script";
  if (options.max_restarts > 0) {
    throw UsageError(fmt::format(
        "--max-restarts {} restarts the whole job, while the elastic flags ({}) make a job that "
        "resets instead (bounded by --reset-limit); give one of them",
        options.max_restarts, kElasticFlags));
  }
  const bool listed = !options.hosts.empty() || !options.hostfile.empty();
  if (!e.discovery_script.empty() && listed) {
    // horovodrun: -H, --hostfile and --host-discovery-script are mutually exclusive.
    throw UsageError(fmt::format(
        "--host-discovery-script and {} both given; the script lists the hosts of an elastic "
        "job: give one of them",
        !options.hosts.empty() ? "-H/--hosts" : "--hostfile"));
  }
  if (e.discovery_script.empty() && !listed && !options.hosts_from_allocation) {
    throw UsageError(fmt::format(
        "an elastic job ({}) needs its hosts: --host-discovery-script FILE (hosts may come and "
        "go), or -H/--hostfile (the job may shrink within them); e.g. --host-discovery-script "
        "./hosts.sh --min-np 2",
        kElasticFlags));
  }
  if (!raw.min_np && !options.num_proc) {
    throw UsageError(
        "an elastic job needs -np N (the ranks to start with) or --min-np N (the fewest it "
        "runs with), as horovodrun");
  }
  e.min_np = raw.min_np ? *raw.min_np : *options.num_proc;
  if (!options.num_proc) options.num_proc = e.min_np;  // docs/elastic.md: -np defaults to it
  if (e.max_np && e.min_np > *e.max_np) {
    throw UsageError(fmt::format("--min-np {} is above --max-np {}; give --min-np <= --max-np",
                                 e.min_np, *e.max_np));
  }
  if (*options.num_proc < e.min_np) {
    throw UsageError(fmt::format(
        "-np {} is below --min-np {}: the job would start with fewer ranks than it may run "
        "with; give --min-np <= -np",
        *options.num_proc, e.min_np));
  }
  if (e.max_np && *options.num_proc > *e.max_np) {
    throw UsageError(fmt::format("-np {} is above --max-np {}; give -np <= --max-np",
                                 *options.num_proc, *e.max_np));
  }
}

// --start-timeout, the output and log flags.
void apply_output(const RawOptions& raw, const Environment& env, Options& options) {
  if (raw.start_timeout) {
    options.start_timeout = std::chrono::seconds(*raw.start_timeout);
  } else if (auto seconds = seconds_from_env(env, "HOROVOD_START_TIMEOUT", "--start-timeout")) {
    options.start_timeout = *seconds;
  }
  options.prefix_timestamp = raw.prefix_timestamp || raw.timestamp_output;
  if (raw.log_level.empty()) return;
  // spdlog's names (and its "warn", "err"); horovodrun's highest level "fatal" is passed on
  // as it is (HORA_LOG_LEVEL=fatal, HOROVOD_LOG_LEVEL=FATAL), not lowered to "error".
  const std::string name = lower(raw.log_level);
  const spdlog::level::level_enum level = spdlog::level::from_str(name);
  if (name == "fatal") {
    options.log_level = name;
  } else if (level == spdlog::level::off || level == spdlog::level::critical) {
    throw UsageError(fmt::format(
        "--log-level {}: unknown level; use trace, debug, info, warning, error or fatal",
        raw.log_level));
  } else {
    const auto text = spdlog::level::to_string_view(level);
    options.log_level.assign(text.data(), text.size());
  }
}

// --ssh-strict-host-key-checking and the interface flags.
void apply_network(const RawOptions& raw, Options& options) {
  if (!raw.strict_host_key_checking.empty()) {
    options.ssh_strict_host_key_checking_given = true;
    const std::string mode = lower(raw.strict_host_key_checking);
    if (mode != "yes" && mode != "accept-new" && mode != "no") {
      throw UsageError(fmt::format("--ssh-strict-host-key-checking {}: use yes, accept-new or no",
                                   raw.strict_host_key_checking));
    }
    options.ssh_strict_host_key_checking = mode;
  }
  auto add_interface = [&](const std::string& name, const char* flag) {
    std::string n(trim(name));
    if (n.empty()) {
      throw UsageError(fmt::format("{}: empty interface name; e.g. {} eth0", flag, flag));
    }
    if (std::find(options.network_interfaces.begin(), options.network_interfaces.end(), n) ==
        options.network_interfaces.end()) {
      options.network_interfaces.push_back(n);
    }
  };
  for (const std::string& list : raw.network_interfaces_lists) {
    std::size_t start = 0;
    while (true) {
      std::size_t comma = list.find(',', start);
      add_interface(list.substr(start, comma - start), "--network-interfaces");
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  for (const std::string& name : raw.network_interface) add_interface(name, "--network-interface");
}

// -x NAME[=VALUE]: resolved against horarun's environment, range-checked like the flag that
// sets the same variable.
void apply_env_forward(const RawOptions& raw, const Environment& env, Options& options) {
  for (const std::string& item : raw.env) {
    const std::size_t eq = item.find('=');
    std::string name = item.substr(0, eq);
    if (name.empty()) {
      throw UsageError(
          fmt::format("-x '{}': the variable name is empty; use -x NAME or "
                      "-x NAME=VALUE",
                      item));
    }
    if (name.find('\0') != std::string::npos) {
      throw UsageError("-x: a variable name cannot contain a NUL byte");
    }
    std::string value;
    if (eq != std::string::npos) {
      value = item.substr(eq + 1);
    } else {
      auto it = env.find(name);
      if (it == env.end()) {
        throw UsageError(fmt::format(
            "-x {}: {} is not set in horarun's environment; set it or give a value with "
            "-x {}=VALUE",
            name, name, name));
      }
      value = it->second;
    }
    // The runtime's duration and size variables take the ranges of the flags that set them.
    const TuningFlag* flag = tuning_flag_for_variable(name);
    std::string error;
    if (flag != nullptr && flag->scale == 1 && !parse_in_range(value, flag->range, &error)) {
      throw UsageError(fmt::format("-x {}={}: {} (as {}); give {} a value in that range", name,
                                   value, error, flag->flag, name));
    }
    options.env_forward.emplace_back(std::move(name), std::move(value));
  }
}

// What the job runs and on how many ranks: a command, and -np unless the hosts say it.
void check_job(const Options& options) {
  const bool listed = !options.hosts.empty() || !options.hostfile.empty() ||
                      options.hosts_from_allocation || !options.elastic.discovery_script.empty();
  if (!options.num_proc && !listed && !options.check_build) {
    throw UsageError("-np is required without -H or --hostfile (e.g. horarun -np 4 ./train)");
  }
  // Without -H every rank runs here: one host, so -np is bounded as one host's slots are.
  if (options.num_proc && !listed && *options.num_proc > HostSpec::kMaxSlots) {
    throw UsageError(fmt::format(
        "-np {}: without -H or --hostfile every rank runs on this machine, which takes at most "
        "{} (the most slots of one host); list the hosts with -H or --hostfile",
        *options.num_proc, HostSpec::kMaxSlots));
  }
  if (options.command.empty() && !options.check_build && !options.dry_run) {
    throw UsageError(
        "no command given; put it after the options: horarun -np 4 -H localhost:4 ./train");
  }
  if (!options.command.empty() && options.command.front().empty()) {
    throw UsageError(
        "the program to run is empty (\"\"); give its name or path after the options: "
        "horarun -np 4 ./train");
  }
}

}  // namespace

SplitCommandLine split_command_line(const std::vector<std::string>& args) {
  return parse_command_line(args).split;
}

Options parse_options(const std::vector<std::string>& args, const Environment& env) {
  Parsed parsed = parse_command_line(args);
  Options options = std::move(parsed.options);
  if (!parsed.help_text.empty()) {
    options = Options{};
    options.help_text = std::move(parsed.help_text);
    return options;
  }
  const RawOptions& raw = parsed.raw;
  if (!options.hosts.empty() && !options.hostfile.empty()) {
    throw UsageError("-H/--hosts and --hostfile both given; use one of them");
  }
  apply_habits(raw, options);
  for (const std::string& warning : options.warnings) launcher_log()->warn("{}", warning);
  apply_output(raw, env, options);
  apply_network(raw, options);
  apply_env_forward(raw, env, options);
  add_tuning(raw, options.tuning);
  apply_horovod_flags(raw.horovod, env, options);
  if (!options.help_text.empty()) return options;  // -v/--version
  apply_launcher(raw.launcher, env, options);      // reads options.elastic.discovery_script
  apply_elastic(raw, env, options);
  options.command = std::move(parsed.split.command);
  check_job(options);
  return options;
}

}  // namespace hora::cli
