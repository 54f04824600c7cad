#include "cli/options/horovod_flags.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>

#include "cli/base/environment.h"
#include "cli/base/errors.h"
#include "cli/options/horovod_config_file.h"

namespace hora::cli {
namespace {

constexpr const char* kNoMpi =
    "hora has no MPI mode (it is always Gloo over TCP, plus NCCL for GPU tensors); drop the flag";
constexpr const char* kNoElastic =
    "hora has no elastic mode (a fixed set of ranks, -np); drop the flag";

// --name / --no-name into one optional<bool>: the last one on the command line wins.
void add_switch(CLI::App& app, const std::string& name, std::optional<bool>& target,
                const std::string& help) {
  app.add_flag_callback(
      "--" + name, [&target] { target = true; }, help);
  app.add_flag_callback(
      "--no-" + name, [&target] { target = false; }, "the opposite of --" + name);
}

// A flag that is accepted by the parser only to be refused with `reason`.
void add_refused(CLI::App& app, HorovodRawFlags& raw, const std::string& names, int values,
                 const std::string& reason) {
  std::string flag = names;  // "--min-np/--min-num-proc"
  std::replace(flag.begin(), flag.end(), ',', '/');
  if (values == 0) {
    app.add_flag_callback(
        names, [&raw, flag, reason] { raw.refused.emplace_back(flag, reason); },
        "refused: " + reason);
    return;
  }
  app.add_option_function<std::vector<std::string>>(
         names,
         [&raw, flag, reason](const std::vector<std::string>&) {
           raw.refused.emplace_back(flag, reason);
         },
         "refused: " + reason)
      ->expected(values)
      // Only the flag's own values: the user's command that follows is not taken as more.
      ->allow_extra_args(false);
}

void put(EnvBlock& env, const std::string& name, std::string value) {
  auto it = std::find_if(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
  if (it != env.end()) {
    it->second = std::move(value);
  } else {
    env.emplace_back(name, std::move(value));
  }
}

void non_negative(const char* flag, double v) {
  if (!(v >= 0) || !std::isfinite(v)) {
    throw UsageError(fmt::format("{} {}: give a number of at least 0", flag, v));
  }
}

// hora's tuning variables and the Horovod variable that means the same, same value.
constexpr std::pair<const char*, const char*> kHoraToHorovod[] = {
    {"HORA_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD"},
    {"HORA_CYCLE_TIME_MS", "HOROVOD_CYCLE_TIME"},
    {"HORA_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY"},
    {"HORA_TIMELINE", "HOROVOD_TIMELINE"},
    {"HORA_TIMELINE_MARK_CYCLES", "HOROVOD_TIMELINE_MARK_CYCLES"},
    {"HORA_STALL_CHECK_DISABLE", "HOROVOD_STALL_CHECK_DISABLE"},
    {"HORA_STALL_CHECK_SECONDS", "HOROVOD_STALL_CHECK_TIME_SECONDS"},
    {"HORA_STALL_SHUTDOWN_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"},
    {"HORA_TIMEOUT_SECONDS", "HOROVOD_GLOO_TIMEOUT_SECONDS"},
};

bool has(const EnvBlock& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
}

bool parse_bool(const std::string& where, const std::string& v) {
  std::string l = v;
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "true" || l == "yes" || l == "on" || l == "1") return true;
  if (l == "false" || l == "no" || l == "off" || l == "0") return false;
  throw UsageError(fmt::format("--config-file: {}: '{}' is not true or false", where, v));
}

double parse_number(const std::string& where, const std::string& v) {
  try {
    std::size_t used = 0;
    const double d = std::stod(v, &used);
    if (used == v.size() && std::isfinite(d)) return d;
  } catch (const std::exception&) {
  }
  throw UsageError(fmt::format("--config-file: {}: '{}' is not a number", where, v));
}

std::string number_text(double v) {
  if (v == static_cast<double>(static_cast<long long>(v))) {
    return std::to_string(static_cast<long long>(v));
  }
  return fmt::format("{}", v);
}

// Settings from the config file, for what the command line did not give (as horovodrun).
void apply_config_file(const std::string& path, HorovodRawFlags& raw, Options& options) {
  EnvBlock& t = options.tuning;
  for (const auto& [key, value] : read_horovod_config_file(path)) {
    auto hora_var = [&, &key = key, &value = value](const char* name, double scale = 1) {
      const double n = parse_number(key, value);
      non_negative(("--config-file " + key).c_str(), n);
      if (!has(t, name)) t.emplace_back(name, number_text(n * scale));
    };
    auto opt_bool = [&, &key = key, &value = value](std::optional<bool>& target) {
      if (!target) target = parse_bool(key, value);
    };
    auto opt_count = [&, &key = key, &value = value](std::optional<long long>& target) {
      if (!target) target = static_cast<long long>(parse_number(key, value));
    };
    if (key == "controller") {
      if (value != "gloo" && value != "Gloo" && value != "GLOO") {
        throw UsageError(fmt::format("--config-file {}: controller: {}: {}", path, value, kNoMpi));
      }
    } else if (key == "params.fusion_threshold_mb") {
      hora_var("HORA_FUSION_THRESHOLD", 1048576.0);
    } else if (key == "params.cycle_time_ms") {
      hora_var("HORA_CYCLE_TIME_MS");
    } else if (key == "params.cache_capacity") {
      hora_var("HORA_CACHE_CAPACITY");
    } else if (key == "params.hierarchical_allreduce") {
      opt_bool(raw.hierarchical_allreduce);
    } else if (key == "params.hierarchical_allgather") {
      opt_bool(raw.hierarchical_allgather);
    } else if (key == "params.torus_allreduce") {
      opt_bool(raw.torus_allreduce);
    } else if (key == "autotune.enabled") {
      opt_bool(raw.autotune);
    } else if (key == "autotune.log_file") {
      if (raw.autotune_log_file.empty()) raw.autotune_log_file = value;
    } else if (key == "autotune.warmup_samples") {
      opt_count(raw.autotune_warmup_samples);
    } else if (key == "autotune.steps_per_sample") {
      opt_count(raw.autotune_steps_per_sample);
    } else if (key == "autotune.bayes_opt_max_samples") {
      opt_count(raw.autotune_bayes_opt_max_samples);
    } else if (key == "autotune.gaussian_process_noise") {
      if (!raw.autotune_gaussian_process_noise) {
        raw.autotune_gaussian_process_noise = parse_number(key, value);
      }
    } else if (key == "timeline.filename") {
      if (!has(t, "HORA_TIMELINE")) t.emplace_back("HORA_TIMELINE", value);
    } else if (key == "timeline.mark_cycles") {
      if (!has(t, "HORA_TIMELINE_MARK_CYCLES") && !raw.timeline_mark_cycles &&
          parse_bool(key, value)) {
        t.emplace_back("HORA_TIMELINE_MARK_CYCLES", "1");
      }
    } else if (key == "stall_check.enabled") {
      if (!has(t, "HORA_STALL_CHECK_DISABLE") && !raw.stall_check && !parse_bool(key, value)) {
        t.emplace_back("HORA_STALL_CHECK_DISABLE", "1");
      }
    } else if (key == "stall_check.warning_time_seconds") {
      hora_var("HORA_STALL_CHECK_SECONDS");
    } else if (key == "stall_check.shutdown_time_seconds") {
      hora_var("HORA_STALL_SHUTDOWN_SECONDS");
    } else if (key == "library_options.mpi_threads_disable") {
      opt_bool(raw.mpi_threads_disable);
    } else if (key == "library_options.num_nccl_streams") {
      opt_count(raw.num_nccl_streams);
    } else if (key == "library_options.thread_affinity") {
      opt_count(raw.thread_affinity);
    } else if (key == "library_options.gloo_timeout_seconds") {
      hora_var("HORA_TIMEOUT_SECONDS");
    } else if (key == "logging.level") {
      if (options.log_level.empty()) {
        std::string l = value;
        for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (l == "fatal") l = "error";
        if (l == "warn") l = "warning";
        if (l != "trace" && l != "debug" && l != "info" && l != "warning" && l != "error") {
          throw UsageError(
              fmt::format("--config-file {}: logging.level: unknown level '{}'", path, value));
        }
        options.log_level = l;
      }
    } else if (key == "logging.with_timestamp") {
      opt_bool(raw.log_with_timestamp);
    } else {
      throw UsageError(
          fmt::format("--config-file {}: unknown setting '{}' (horovodrun 0.28's "
                      "keys: params, autotune, timeline, stall_check, "
                      "library_options, logging, controller)",
                      path, key));
    }
  }
}

}  // namespace

void add_horovod_flags(CLI::App& app, HorovodRawFlags& raw) {
  app.add_flag("--no-horovod-rendezvous", raw.no_horovod_rendezvous,
               "do not serve Horovod's Gloo HTTP rendezvous (HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT "
               "unset); for jobs that do not use Horovod");
  app.add_flag("--no-env-forwarding", raw.no_env_forwarding,
               "do not forward horarun's environment to the ranks (only the contract and -x; "
               "the default forwards all but a denylist, see docs/launcher.md)");
  app.add_flag("--version", raw.version, "-v: print the version and exit");
  app.add_flag("--gloo", raw.gloo, "accepted: hora always uses Gloo (horovodrun's controller)");
  app.add_flag("--disable-cache", raw.disable_cache,
               "accepted: hora keeps no cache of host checks (every launch checks every host)");
  app.add_option("--config-file", raw.config_file,
                 "horovodrun's YAML config file (params, autotune, timeline, stall_check, "
                 "library_options, logging); flags on the command line win");
  add_switch(app, "hierarchical-allreduce", raw.hierarchical_allreduce,
             "Horovod's hierarchical allreduce (HOROVOD_HIERARCHICAL_ALLREDUCE)");
  add_switch(app, "hierarchical-allgather", raw.hierarchical_allgather,
             "Horovod's hierarchical allgather (HOROVOD_HIERARCHICAL_ALLGATHER)");
  add_switch(app, "torus-allreduce", raw.torus_allreduce,
             "Horovod's torus allreduce (HOROVOD_TORUS_ALLREDUCE)");
  add_switch(app, "autotune", raw.autotune, "Horovod's autotuning (HOROVOD_AUTOTUNE)");
  app.add_option("--autotune-log-file", raw.autotune_log_file, "HOROVOD_AUTOTUNE_LOG");
  app.add_option("--autotune-warmup-samples", raw.autotune_warmup_samples,
                 "HOROVOD_AUTOTUNE_WARMUP_SAMPLES");
  app.add_option("--autotune-steps-per-sample", raw.autotune_steps_per_sample,
                 "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE");
  app.add_option("--autotune-bayes-opt-max-samples", raw.autotune_bayes_opt_max_samples,
                 "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES");
  app.add_option("--autotune-gaussian-process-noise", raw.autotune_gaussian_process_noise,
                 "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE (0..1)");
  add_switch(app, "mpi-threads-disable", raw.mpi_threads_disable,
             "HOROVOD_MPI_THREADS_DISABLE (passed on; hora has no MPI)");
  app.add_option("--num-nccl-streams", raw.num_nccl_streams, "HOROVOD_NUM_NCCL_STREAMS");
  app.add_option("--thread-affinity", raw.thread_affinity, "HOROVOD_THREAD_AFFINITY");
  add_switch(app, "log-with-timestamp", raw.log_with_timestamp,
             "Horovod's log lines with (or without) a timestamp (HOROVOD_LOG_HIDE_TIME)");
  app.add_flag_callback(
      "--log-without-timestamp", [&raw] { raw.log_with_timestamp = false; },
      "HOROVOD_LOG_HIDE_TIME=1");
  app.add_flag_callback(
      "--log-hide-timestamp", [&raw] { raw.log_with_timestamp = false; },
      "deprecated spelling of --log-without-timestamp");
  app.add_flag_callback(
      "--no-log-hide-timestamp", [&raw] { raw.log_with_timestamp = true; },
      "deprecated spelling of --log-with-timestamp");
  app.add_flag_callback(
      "--stall-check", [&raw] { raw.stall_check = true; }, "the opposite of --no-stall-check");
  app.add_flag_callback(
      "--no-timeline-mark-cycles", [&raw] { raw.timeline_mark_cycles = false; },
      "the opposite of --timeline-mark-cycles");

  add_refused(app, raw, "--mpi", 0, kNoMpi);
  add_refused(app, raw, "--jsrun", 0, kNoMpi);
  add_refused(app, raw, "--mpi-args", 1, kNoMpi);
  add_refused(app, raw, "--binding-args", 1, kNoMpi);
  add_refused(app, raw, "--min-np,--min-num-proc", 1, kNoElastic);
  add_refused(app, raw, "--max-np,--max-num-proc", 1, kNoElastic);
  add_refused(app, raw, "--slots-per-host", 1, kNoElastic);
  add_refused(app, raw, "--elastic-timeout", 1, kNoElastic);
  add_refused(app, raw, "--reset-limit", 1, kNoElastic);
  // Takes two values in horovodrun; the second is then read as the command, which does not
  // matter: the flag is refused before anything runs.
  add_refused(app, raw, "--blacklist-cooldown-range", 1, kNoElastic);
  add_refused(app, raw, "--host-discovery-script", 1, kNoElastic);
}

void apply_horovod_flags(const HorovodRawFlags& given, const Environment& /*env*/,
                         Options& options) {
  HorovodRawFlags raw = given;
  if (!raw.refused.empty()) {
    throw UsageError(fmt::format("{}: {}", raw.refused.front().first, raw.refused.front().second));
  }
  if (raw.version) {
    options.help_text =
        fmt::format("horarun {} (hora; takes horovodrun 0.28's flags)\n", HORA_VERSION);
    return;
  }
  options.horovod_rendezvous = !raw.no_horovod_rendezvous;
  options.forward_environment = !raw.no_env_forwarding;
  if (!raw.config_file.empty()) apply_config_file(raw.config_file, raw, options);

  EnvBlock& t = options.tuning;
  // hora's timeline flag negation and stall check re-enable act on hora's own variables too.
  if (raw.timeline_mark_cycles == false) {
    t.erase(std::remove_if(t.begin(), t.end(),
                           [](const auto& kv) { return kv.first == "HORA_TIMELINE_MARK_CYCLES"; }),
            t.end());
  }
  if (raw.stall_check == true) {
    t.erase(std::remove_if(t.begin(), t.end(),
                           [](const auto& kv) { return kv.first == "HORA_STALL_CHECK_DISABLE"; }),
            t.end());
  }
  // Horovod's names for what hora's flags set.
  const EnvBlock hora_names = t;
  for (const auto& [hora, horovod] : kHoraToHorovod) {
    for (const auto& [name, value] : hora_names) {
      if (name == hora) put(t, horovod, value);
    }
  }
  if (!options.log_level.empty()) {
    std::string upper = options.log_level;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    put(t, "HOROVOD_LOG_LEVEL", upper);
  }
  auto flag01 = [&](const char* name, const std::optional<bool>& v, bool invert = false) {
    if (v) put(t, name, (*v != invert) ? "1" : "0");
  };
  flag01("HOROVOD_HIERARCHICAL_ALLREDUCE", raw.hierarchical_allreduce);
  flag01("HOROVOD_HIERARCHICAL_ALLGATHER", raw.hierarchical_allgather);
  flag01("HOROVOD_TORUS_ALLREDUCE", raw.torus_allreduce);
  flag01("HOROVOD_MPI_THREADS_DISABLE", raw.mpi_threads_disable);
  flag01("HOROVOD_LOG_HIDE_TIME", raw.log_with_timestamp, true);
  auto count = [&](const char* flag, const char* name, const std::optional<long long>& v) {
    if (!v) return;
    non_negative(flag, static_cast<double>(*v));
    put(t, name, std::to_string(*v));
  };
  count("--num-nccl-streams", "HOROVOD_NUM_NCCL_STREAMS", raw.num_nccl_streams);
  count("--thread-affinity", "HOROVOD_THREAD_AFFINITY", raw.thread_affinity);
  if (raw.autotune_gaussian_process_noise) {
    const double n = *raw.autotune_gaussian_process_noise;
    if (!(n >= 0 && n <= 1)) {
      throw UsageError(
          fmt::format("--autotune-gaussian-process-noise {}: give a number in [0, 1]", n));
    }
  }
  // As horovodrun: the autotune parameters are passed on only with --autotune.
  if (raw.autotune == true) {
    put(t, "HOROVOD_AUTOTUNE", "1");
    if (!raw.autotune_log_file.empty()) put(t, "HOROVOD_AUTOTUNE_LOG", raw.autotune_log_file);
    count("--autotune-warmup-samples", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
          raw.autotune_warmup_samples);
    count("--autotune-steps-per-sample", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
          raw.autotune_steps_per_sample);
    count("--autotune-bayes-opt-max-samples", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
          raw.autotune_bayes_opt_max_samples);
    if (raw.autotune_gaussian_process_noise) {
      put(t, "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
          fmt::format("{}", *raw.autotune_gaussian_process_noise));
    }
  }
}

std::optional<std::string> rewrite_horovod_single_dash(const std::string& arg) {
  if (arg == "-hostfile") return "--hostfile";
  if (arg.rfind("-hostfile=", 0) == 0) return "--hostfile=" + arg.substr(10);
  if (arg == "-v") return "--version";
  return std::nullopt;
}

}  // namespace hora::cli
