#include "cli/options/horovod_flags.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>

#include "cli/base/environment.h"
#include "cli/base/errors.h"
#include "cli/options/horovod_config_file.h"
#include "cli/options/number_range.h"
#include "cli/options/range_validator.h"
#include "cli/options/tuning_flags.h"
#include "common/job_environment.h"
#include "common/text.h"

namespace hora::cli {
namespace {

constexpr const char* kNoMpi =
    "hora has no MPI mode (it is always Gloo over TCP, plus NCCL for GPU tensors); drop the flag";

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

bool has(const EnvBlock& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
}

bool parse_bool(const std::string& where, const std::string& v) {
  const std::string l = lower(v);
  if (l == "true" || l == "yes" || l == "on" || l == "1") return true;
  if (l == "false" || l == "no" || l == "off" || l == "0") return false;
  throw UsageError(fmt::format("--config-file: {}: '{}' is not true or false", where, v));
}

// --autotune-gaussian-process-noise and its config key.
constexpr NumberRange kNoiseRange{0, 1, false, false, "a noise level"};

// A number from the config file: the range and words of the flag it stands for, naming the key.
double config_number(const std::string& path, const std::string& key, const std::string& v,
                     const NumberRange& range, const char* flag) {
  std::string error;
  const auto n = parse_in_range(v, range, &error);
  if (!n) {
    throw UsageError(fmt::format("--config-file {}: {}: {} (as {}); fix the value in the file",
                                 path, key, error, flag));
  }
  return *n;
}

// Settings from the config file, for what the command line did not give (as horovodrun).
void apply_config_file(const std::string& path, HorovodRawFlags& raw, Options& options) {
  EnvBlock& t = options.tuning;
  for (const auto& [key, value] : read_horovod_config_file(path)) {
    auto opt_bool = [&, &key = key, &value = value](std::optional<bool>& target) {
      if (!target) target = parse_bool(key, value);
    };
    auto opt_count = [&, &key = key, &value = value](std::optional<long long>& target,
                                                     const char* flag) {
      const double n = config_number(path, key, value, kCountRange, flag);
      if (!target) target = static_cast<long long>(n);
    };
    if (const TuningFlag* f = tuning_flag_for_key(key)) {
      const double n = config_number(path, key, value, f->range, f->flag);
      if (!has(t, f->variable)) t.emplace_back(f->variable, tuning_value(*f, n));
    } else if (key == "controller") {
      if (value != "gloo" && value != "Gloo" && value != "GLOO") {
        throw UsageError(fmt::format("--config-file {}: controller: {}: {}", path, value, kNoMpi));
      }
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
      opt_count(raw.autotune_warmup_samples, "--autotune-warmup-samples");
    } else if (key == "autotune.steps_per_sample") {
      opt_count(raw.autotune_steps_per_sample, "--autotune-steps-per-sample");
    } else if (key == "autotune.bayes_opt_max_samples") {
      opt_count(raw.autotune_bayes_opt_max_samples, "--autotune-bayes-opt-max-samples");
    } else if (key == "autotune.gaussian_process_noise") {
      const double n =
          config_number(path, key, value, kNoiseRange, "--autotune-gaussian-process-noise");
      if (!raw.autotune_gaussian_process_noise) raw.autotune_gaussian_process_noise = n;
    } else if (key == "timeline.filename") {
      if (!has(t, job_env::kTimeline)) t.emplace_back(job_env::kTimeline, value);
    } else if (key == "timeline.mark_cycles") {
      if (!has(t, job_env::kTimelineMarkCycles) && !raw.timeline_mark_cycles &&
          parse_bool(key, value)) {
        t.emplace_back(job_env::kTimelineMarkCycles, "1");
      }
    } else if (key == "stall_check.enabled") {
      if (!has(t, job_env::kStallCheckDisable) && !raw.stall_check && !parse_bool(key, value)) {
        t.emplace_back(job_env::kStallCheckDisable, "1");
      }
    } else if (key == "library_options.mpi_threads_disable") {
      opt_bool(raw.mpi_threads_disable);
    } else if (key == "library_options.num_nccl_streams") {
      opt_count(raw.num_nccl_streams, "--num-nccl-streams");
    } else if (key == "library_options.thread_affinity") {
      opt_count(raw.thread_affinity, "--thread-affinity");
    } else if (key == "logging.level") {
      if (options.log_level.empty()) {
        std::string l = lower(value);
        if (l == "warn") l = "warning";
        if (l != "trace" && l != "debug" && l != "info" && l != "warning" && l != "error" &&
            l != "fatal") {
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
  app.add_flag(
      "--no-horovod-rendezvous", raw.no_horovod_rendezvous,
      fmt::format("do not serve Horovod's Gloo HTTP rendezvous ({}, {} unset); for jobs that "
                  "do not use Horovod",
                  job_env::kHorovodGlooRendezvousAddr, job_env::kHorovodGlooRendezvousPort));
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
             fmt::format("Horovod's hierarchical allreduce ({})",
                         job_env::kHorovodHierarchicalAllreduce));
  add_switch(app, "hierarchical-allgather", raw.hierarchical_allgather,
             fmt::format("Horovod's hierarchical allgather ({})",
                         job_env::kHorovodHierarchicalAllgather));
  add_switch(app, "torus-allreduce", raw.torus_allreduce,
             fmt::format("Horovod's torus allreduce ({})", job_env::kHorovodTorusAllreduce));
  add_switch(app, "autotune", raw.autotune,
             fmt::format("Horovod's autotuning ({})", job_env::kHorovodAutotune));
  app.add_option("--autotune-log-file", raw.autotune_log_file, job_env::kHorovodAutotuneLog);
  app.add_option("--autotune-warmup-samples", raw.autotune_warmup_samples,
                 job_env::kHorovodAutotuneWarmupSamples)
      ->check(in_range(kCountRange));
  app.add_option("--autotune-steps-per-sample", raw.autotune_steps_per_sample,
                 job_env::kHorovodAutotuneStepsPerSample)
      ->check(in_range(kCountRange));
  app.add_option("--autotune-bayes-opt-max-samples", raw.autotune_bayes_opt_max_samples,
                 job_env::kHorovodAutotuneBayesOptMaxSamples)
      ->check(in_range(kCountRange));
  app.add_option("--autotune-gaussian-process-noise", raw.autotune_gaussian_process_noise,
                 fmt::format("{} (0..1)", job_env::kHorovodAutotuneGaussianProcessNoise))
      ->check(in_range(kNoiseRange));
  add_switch(app, "mpi-threads-disable", raw.mpi_threads_disable,
             fmt::format("{} (passed on; hora has no MPI)", job_env::kHorovodMpiThreadsDisable));
  app.add_option("--num-nccl-streams", raw.num_nccl_streams, job_env::kHorovodNumNcclStreams)
      ->check(in_range(kCountRange));
  app.add_option("--thread-affinity", raw.thread_affinity, job_env::kHorovodThreadAffinity)
      ->check(in_range(kCountRange));
  add_switch(app, "log-with-timestamp", raw.log_with_timestamp,
             fmt::format("Horovod's log lines with (or without) a timestamp ({})",
                         job_env::kHorovodLogHideTime));
  app.add_flag_callback(
      "--log-without-timestamp", [&raw] { raw.log_with_timestamp = false; },
      fmt::format("{}=1", job_env::kHorovodLogHideTime));
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
  // The elastic flags are options.cc's (add_elastic_flags), next to -np and -H.
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
                           [](const auto& kv) { return kv.first == job_env::kTimelineMarkCycles; }),
            t.end());
  }
  if (raw.stall_check == true) {
    t.erase(std::remove_if(t.begin(), t.end(),
                           [](const auto& kv) { return kv.first == job_env::kStallCheckDisable; }),
            t.end());
  }
  // Horovod's names for what hora's flags set.
  const EnvBlock hora_names = t;
  for (const auto& [hora, horovod] : job_env::kHoraToHorovod) {
    for (const auto& [name, value] : hora_names) {
      if (name == hora) put(t, horovod, value);
    }
  }
  if (!options.log_level.empty()) {
    std::string upper = options.log_level;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    put(t, job_env::kHorovodLogLevel, upper);
  }
  auto flag01 = [&](const char* name, const std::optional<bool>& v, bool invert = false) {
    if (v) put(t, name, (*v != invert) ? "1" : "0");
  };
  flag01(job_env::kHorovodHierarchicalAllreduce, raw.hierarchical_allreduce);
  flag01(job_env::kHorovodHierarchicalAllgather, raw.hierarchical_allgather);
  flag01(job_env::kHorovodTorusAllreduce, raw.torus_allreduce);
  flag01(job_env::kHorovodMpiThreadsDisable, raw.mpi_threads_disable);
  flag01(job_env::kHorovodLogHideTime, raw.log_with_timestamp, true);
  auto count = [&](const char* flag, const char* name, const std::optional<long long>& v) {
    if (!v) return;
    non_negative(flag, static_cast<double>(*v));
    put(t, name, std::to_string(*v));
  };
  count("--num-nccl-streams", job_env::kHorovodNumNcclStreams, raw.num_nccl_streams);
  count("--thread-affinity", job_env::kHorovodThreadAffinity, raw.thread_affinity);
  // As horovodrun: the autotune parameters are passed on only with --autotune.
  if (raw.autotune == true) {
    put(t, job_env::kHorovodAutotune, "1");
    if (!raw.autotune_log_file.empty()) put(t, job_env::kHorovodAutotuneLog, raw.autotune_log_file);
    count("--autotune-warmup-samples", job_env::kHorovodAutotuneWarmupSamples,
          raw.autotune_warmup_samples);
    count("--autotune-steps-per-sample", job_env::kHorovodAutotuneStepsPerSample,
          raw.autotune_steps_per_sample);
    count("--autotune-bayes-opt-max-samples", job_env::kHorovodAutotuneBayesOptMaxSamples,
          raw.autotune_bayes_opt_max_samples);
    if (raw.autotune_gaussian_process_noise) {
      put(t, job_env::kHorovodAutotuneGaussianProcessNoise,
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
