#include "cli/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/errors.h"
#include "cli/horovod_flags.h"

namespace hora::cli {
namespace {

constexpr std::string_view kUsageHint = "run 'horarun --help' for the options";

// Raw values as CLI11 fills them; parse_options() validates and converts them into Options.
struct RawOptions {
  std::optional<int> num_proc;
  std::string hosts;
  std::string hostfile;
  std::optional<int> start_timeout;
  bool verbose = false;
  std::string output_filename;
  bool prefix_timestamp = false;
  std::string log_level;
  bool check_build = false;
  bool dry_run = false;
  std::optional<int> ssh_port;
  std::string ssh_identity_file;
  std::string ssh_config;
  std::string strict_host_key_checking;  // empty: not given
  std::vector<std::string> network_interfaces_lists;
  std::vector<std::string> network_interface;
  std::vector<std::string> env;
  bool tcp = false;
  bool force_ssh = false;
  std::string horarun_path;
  std::string timeline_filename;
  bool timeline_mark_cycles = false;
  std::optional<double> fusion_threshold_mb;
  std::optional<double> cycle_time_ms;
  std::optional<long long> cache_capacity;
  bool no_stall_check = false;
  std::optional<double> stall_warning_seconds;
  std::optional<double> stall_shutdown_seconds;
  std::optional<double> gloo_timeout_seconds;
  HorovodRawFlags horovod;
};

std::unique_ptr<CLI::App> make_app(RawOptions& raw) {
  auto app = std::make_unique<CLI::App>(
      "horarun: start a hora (Horovod-compatible) job.\n"
      "  horarun -np 4 -H localhost:4 ./train [args...]\n"
      "Single-dash long options as in horovodrun: -np N, -cb, -prefix-timestamp.",
      "horarun");
  app->set_help_flag("-h,--help", "Print this help and exit");
  app->add_option("--num-proc", raw.num_proc,
                  "-np N: number of ranks (default: the slots of -H/--hostfile)");
  app->add_option("-H,--hosts", raw.hosts,
                  "host:slots,... (also host, user@host:slots, [ipv6]:slots); "
                  "default localhost:<np>");
  app->add_option("--hostfile", raw.hostfile, "file of 'host slots=N' lines");
  app->add_option("--start-timeout", raw.start_timeout,
                  "seconds for every rank to reach hora::init() (default 30, or "
                  "HOROVOD_START_TIMEOUT)");
  app->add_flag("--verbose", raw.verbose, "print the rank table and the launch steps");
  app->add_option("--output-filename", raw.output_filename,
                  "also write each rank's output to DIR/rank.N/stdout and stderr");
  app->add_flag("--prefix-output-with-timestamp", raw.prefix_timestamp,
                "-prefix-timestamp: prefix each output line with the time it was received");
  app->add_option("--log-level", raw.log_level,
                  "trace, debug, info, warning or error (sets HORA_LOG_LEVEL in every rank)");
  app->add_flag("--check-build", raw.check_build,
                "-cb: print which backends were built and exit");
  app->add_flag("--dry-run", raw.dry_run, "check the hosts, print the rank table and each host's interface, and exit without starting ranks");
  app->add_option("-p,--ssh-port", raw.ssh_port, "SSH port of every remote host");
  app->add_option("-i,--ssh-identity-file", raw.ssh_identity_file, "SSH private key file");
  app->add_option("--ssh-config", raw.ssh_config, "ssh_config file (default ~/.ssh/config)");
  app->add_option("--ssh-strict-host-key-checking", raw.strict_host_key_checking,
                  "yes, accept-new (default) or no");
  app->add_option("--network-interfaces", raw.network_interfaces_lists,
                  "comma-separated interfaces for the job's traffic");
  app->add_option("--network-interface", raw.network_interface,
                  "an interface for the job's traffic (repeatable)");
  app->add_option("-x,--env", raw.env,
                  "NAME[=VALUE]: set or forward a variable to every rank (repeatable)");
  app->add_flag("--tcp", raw.tcp, "TCP only: sets NCCL_IB_DISABLE=1 in every rank");
  app->add_flag("--force-ssh", raw.force_ssh, "use SSH even for hosts that are this machine");
  app->add_option("--horarun-path", raw.horarun_path,
                  "path of horarun on the remote hosts (default: this binary's path)");
  app->add_option("--timeline-filename", raw.timeline_filename,
                  "write a Chrome trace of the collectives (HORA_TIMELINE)");
  app->add_flag("--timeline-mark-cycles", raw.timeline_mark_cycles,
                "mark engine cycles in the timeline (HORA_TIMELINE_MARK_CYCLES)");
  app->add_option("--fusion-threshold-mb", raw.fusion_threshold_mb,
                  "tensor fusion buffer in MiB, 0 disables (HORA_FUSION_THRESHOLD; default 128)");
  app->add_option("--cycle-time-ms", raw.cycle_time_ms,
                  "engine cycle in milliseconds (HORA_CYCLE_TIME_MS; default 1)");
  app->add_option("--cache-capacity", raw.cache_capacity,
                  "response cache entries, 0 disables (HORA_CACHE_CAPACITY; default 1024)");
  app->add_flag("--no-stall-check", raw.no_stall_check,
                "disable the stall check (HORA_STALL_CHECK_DISABLE=1)");
  app->add_option("--stall-check-warning-time-seconds", raw.stall_warning_seconds,
                  "warn about tensors some ranks did not submit after this long (default 60)");
  app->add_option("--stall-check-shutdown-time-seconds", raw.stall_shutdown_seconds,
                  "fail the job after a stall this long, 0 = never (default 0)");
  app->add_option("--gloo-timeout-seconds", raw.gloo_timeout_seconds,
                  "how long a collective may make no progress (HORA_TIMEOUT_SECONDS; default 30)");
  add_horovod_flags(*app, raw.horovod);
  return app;
}

// The option, if any, that `arg` names and whether it takes a separate value argument.
bool takes_separate_value(CLI::App& app, const std::string& arg) {
  if (arg.rfind("--", 0) == 0) {
    if (arg.find('=') != std::string::npos) return false;
    const CLI::Option* opt = app.get_option_no_throw(arg);
    return opt != nullptr && opt->get_items_expected_max() > 0;
  }
  if (arg.size() == 2 && arg[0] == '-') {  // -H value; -Hvalue carries its own
    const CLI::Option* opt = app.get_option_no_throw(arg);
    return opt != nullptr && opt->get_items_expected_max() > 0;
  }
  return false;
}

// horovodrun's single-dash long options; nullopt if `arg` is none of them.
std::optional<std::string> rewrite_single_dash(const std::string& arg) {
  if (auto horovod = rewrite_horovod_single_dash(arg)) return horovod;
  if (arg == "-cb") return "--check-build";
  if (arg == "-prefix-timestamp") return "--prefix-output-with-timestamp";
  if (arg == "-np") return "--num-proc";
  if (arg.rfind("-np=", 0) == 0) return "--num-proc=" + arg.substr(4);
  if (arg.rfind("-np", 0) == 0 && arg.size() > 3 &&
      std::all_of(arg.begin() + 3, arg.end(), [](char c) { return std::isdigit(c) != 0; })) {
    return "--num-proc=" + arg.substr(3);  // argparse accepts -np4
  }
  return std::nullopt;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Decimal text of a number for a variable: integers without a fraction.
std::string number_text(double v) {
  if (v == static_cast<double>(static_cast<long long>(v))) {
    return std::to_string(static_cast<long long>(v));
  }
  return fmt::format("{}", v);
}

void add_tuning(const RawOptions& raw, std::vector<std::pair<std::string, std::string>>& out) {
  auto positive = [](const char* flag, double v, bool allow_zero) {
    if (v < 0 || (!allow_zero && v == 0) || !std::isfinite(v)) {
      throw UsageError(fmt::format("{} {}: give a number {} 0", flag, v,
                                   allow_zero ? "of at least" : "greater than"));
    }
  };
  if (!raw.timeline_filename.empty()) out.emplace_back("HORA_TIMELINE", raw.timeline_filename);
  if (raw.timeline_mark_cycles) out.emplace_back("HORA_TIMELINE_MARK_CYCLES", "1");
  if (raw.fusion_threshold_mb) {
    positive("--fusion-threshold-mb", *raw.fusion_threshold_mb, true);
    out.emplace_back("HORA_FUSION_THRESHOLD",
                     std::to_string(static_cast<long long>(*raw.fusion_threshold_mb * 1048576.0)));
  }
  if (raw.cycle_time_ms) {
    positive("--cycle-time-ms", *raw.cycle_time_ms, false);
    out.emplace_back("HORA_CYCLE_TIME_MS", number_text(*raw.cycle_time_ms));
  }
  if (raw.cache_capacity) {
    if (*raw.cache_capacity < 0) {
      throw UsageError(fmt::format("--cache-capacity {}: give 0 (no cache) or more entries",
                                   *raw.cache_capacity));
    }
    out.emplace_back("HORA_CACHE_CAPACITY", std::to_string(*raw.cache_capacity));
  }
  if (raw.no_stall_check) out.emplace_back("HORA_STALL_CHECK_DISABLE", "1");
  if (raw.stall_warning_seconds) {
    positive("--stall-check-warning-time-seconds", *raw.stall_warning_seconds, false);
    out.emplace_back("HORA_STALL_CHECK_SECONDS", number_text(*raw.stall_warning_seconds));
  }
  if (raw.stall_shutdown_seconds) {
    positive("--stall-check-shutdown-time-seconds", *raw.stall_shutdown_seconds, true);
    out.emplace_back("HORA_STALL_SHUTDOWN_SECONDS", number_text(*raw.stall_shutdown_seconds));
  }
  if (raw.gloo_timeout_seconds) {
    positive("--gloo-timeout-seconds", *raw.gloo_timeout_seconds, false);
    out.emplace_back("HORA_TIMEOUT_SECONDS", number_text(*raw.gloo_timeout_seconds));
  }
}

}  // namespace

SplitCommandLine split_command_line(const std::vector<std::string>& args) {
  RawOptions scratch;
  std::unique_ptr<CLI::App> app = make_app(scratch);
  SplitCommandLine out;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") break;  // the command starts here
    std::string rewritten = rewrite_single_dash(arg).value_or(arg);
    const bool value_follows = takes_separate_value(*app, rewritten);
    out.options.push_back(std::move(rewritten));
    if (value_follows && i + 1 < args.size()) out.options.push_back(args[++i]);
  }
  out.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

Options parse_options(const std::vector<std::string>& args, const Environment& env) {
  SplitCommandLine split = split_command_line(args);
  RawOptions raw;
  std::unique_ptr<CLI::App> app = make_app(raw);
  Options options;
  try {
    std::vector<std::string> reversed(split.options.rbegin(), split.options.rend());
    app->parse(reversed);  // CLI11 consumes a reversed vector
  } catch (const CLI::CallForHelp&) {
    options.help_text = app->help();
    return options;
  } catch (const CLI::ParseError& e) {
    throw UsageError(fmt::format("{}; {}", e.what(), kUsageHint));
  }

  if (raw.num_proc) {
    if (*raw.num_proc < 1) {
      throw UsageError(fmt::format("-np {}: the number of ranks must be at least 1", *raw.num_proc));
    }
    options.num_proc = raw.num_proc;
  }
  if (!raw.hosts.empty() && !raw.hostfile.empty()) {
    throw UsageError("-H/--hosts and --hostfile both given; use one of them");
  }
  options.hosts = raw.hosts;
  options.hostfile = raw.hostfile;
  if (raw.start_timeout) {
    if (*raw.start_timeout < 1) {
      throw UsageError(fmt::format("--start-timeout {}: give a number of seconds of at least 1",
                                   *raw.start_timeout));
    }
    options.start_timeout = std::chrono::seconds(*raw.start_timeout);
  } else if (auto it = env.find("HOROVOD_START_TIMEOUT"); it != env.end() && !it->second.empty()) {
    int seconds = 0;
    const std::string& v = it->second;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
    if (ec != std::errc() || end != v.data() + v.size() || seconds < 1) {
      throw UsageError(fmt::format(
          "HOROVOD_START_TIMEOUT='{}' is not a number of seconds of at least 1; fix or unset it, "
          "or pass --start-timeout",
          v));
    }
    options.start_timeout = std::chrono::seconds(seconds);
  }
  options.verbose = raw.verbose;
  options.output_filename = raw.output_filename;
  options.prefix_timestamp = raw.prefix_timestamp;
  if (!raw.log_level.empty()) {
    std::string level = lower(raw.log_level);
    if (level == "fatal") level = "error";  // horovodrun's highest level
    if (level == "warn") level = "warning";
    static const std::vector<std::string> kLevels = {"trace", "debug", "info", "warning", "error"};
    if (std::find(kLevels.begin(), kLevels.end(), level) == kLevels.end()) {
      throw UsageError(fmt::format(
          "--log-level {}: unknown level; use trace, debug, info, warning or error", raw.log_level));
    }
    options.log_level = level;
  }
  options.check_build = raw.check_build;
  options.dry_run = raw.dry_run;

  if (raw.ssh_port && (*raw.ssh_port < 1 || *raw.ssh_port > 65535)) {
    throw UsageError(fmt::format("-p/--ssh-port {}: a port is 1..65535", *raw.ssh_port));
  }
  options.ssh_port = raw.ssh_port;
  options.ssh_identity_file = raw.ssh_identity_file;
  options.ssh_config = raw.ssh_config;
  if (!raw.strict_host_key_checking.empty()) {
    options.ssh_strict_host_key_checking_given = true;
    const std::string mode = lower(raw.strict_host_key_checking);
    if (mode != "yes" && mode != "accept-new" && mode != "no") {
      throw UsageError(fmt::format(
          "--ssh-strict-host-key-checking {}: use yes, accept-new or no",
          raw.strict_host_key_checking));
    }
    options.ssh_strict_host_key_checking = mode;
  }
  auto add_interface = [&](const std::string& name, const char* flag) {
    std::string n = trim(name);
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

  for (const std::string& item : raw.env) {
    const std::size_t eq = item.find('=');
    std::string name = item.substr(0, eq);
    if (name.empty()) {
      throw UsageError(fmt::format("-x '{}': the variable name is empty; use -x NAME or "
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
    options.env_forward.emplace_back(std::move(name), std::move(value));
  }
  options.tcp = raw.tcp;
  add_tuning(raw, options.tuning);
  apply_horovod_flags(raw.horovod, env, options);
  if (!options.help_text.empty()) return options;  // -v/--version
  options.force_ssh = raw.force_ssh;
  options.horarun_path = raw.horarun_path;

  options.command = std::move(split.command);
  if (!options.num_proc && options.hosts.empty() && options.hostfile.empty() &&
      !options.check_build) {
    throw UsageError("-np is required without -H or --hostfile (e.g. horarun -np 4 ./train)");
  }
  if (options.command.empty() && !options.check_build && !options.dry_run) {
    throw UsageError(
        "no command given; put it after the options: horarun -np 4 -H localhost:4 ./train");
  }
  return options;
}

}  // namespace hora::cli
