// horovodrun's engine flags that set the runtime's numeric variables, with their ranges and
// their keys in horovodrun's --config-file: one table, so a value from the command line, the
// config file or -x is checked against the same range and refused with the same words
// (docs/launcher.md, "horovodrun's flags"; docs/environment.md for the runtime's limits).
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "cli/options/number_range.h"
#include "common/job_environment.h"

namespace hora::cli {

// The runtime's limits where it has them; every timeout and stall time at most 30 days.
inline constexpr double kMaxSeconds = 30.0 * 24 * 3600;

struct TuningFlag {
  const char* flag;        // "--cycle-time-ms"
  const char* config_key;  // "params.cycle_time_ms": its key in horovodrun's config file
  const char* variable;    // the runtime's variable it sets
  double scale;            // the variable's units per unit of the flag (MiB -> bytes)
  NumberRange range;       // in the flag's units
  const char* help;
};

inline constexpr std::array<TuningFlag, 6> kTuningFlags{{
    {"--fusion-threshold-mb",
     "params.fusion_threshold_mb",
     job_env::kFusionThreshold,
     1048576.0,
     {0, 1 << 20, false, false, "a size in MiB"},  // 1 TiB of fusion buffer
     "tensor fusion buffer in MiB, 0 disables (HORA_FUSION_THRESHOLD; default 128)"},
    {"--cycle-time-ms",
     "params.cycle_time_ms",
     job_env::kCycleTimeMs,
     1,
     {0, 60'000, true, false, "a number of milliseconds"},  // HORA_CYCLE_TIME_MS's limit
     "engine cycle in milliseconds (HORA_CYCLE_TIME_MS; default 5)"},
    {"--cache-capacity",
     "params.cache_capacity",
     job_env::kCacheCapacity,
     1,
     {0, 1 << 16, false, true, "a number of entries (0: no cache)"},  // the runtime's limit
     "response cache entries, 0 disables (HORA_CACHE_CAPACITY; default 1024)"},
    {"--stall-check-warning-time-seconds",
     "stall_check.warning_time_seconds",
     job_env::kStallCheckSeconds,
     1,
     {0, kMaxSeconds, true, false, "a number of seconds"},
     "warn about tensors some ranks did not submit after this long (default 60)"},
    {"--stall-check-shutdown-time-seconds",
     "stall_check.shutdown_time_seconds",
     job_env::kStallShutdownSeconds,
     1,
     {0, kMaxSeconds, false, false, "a number of seconds (0: never)"},
     "fail the job after a stall this long, 0 = never (default 0)"},
    {"--gloo-timeout-seconds",
     "library_options.gloo_timeout_seconds",
     job_env::kTimeout,
     1,
     {0, kMaxSeconds, true, false, "a number of seconds"},
     "how long a collective may make no progress (HORA_TIMEOUT_SECONDS; default 30)"},
}};

// The table's row for a config-file key ("params.cycle_time_ms"); nullptr when none.
inline const TuningFlag* tuning_flag_for_key(std::string_view config_key) {
  for (const TuningFlag& f : kTuningFlags) {
    if (config_key == f.config_key) return &f;
  }
  return nullptr;
}

// The table's row for a variable ("HORA_CYCLE_TIME_MS"); nullptr when none.
inline const TuningFlag* tuning_flag_for_variable(std::string_view variable) {
  for (const TuningFlag& f : kTuningFlags) {
    if (variable == f.variable) return &f;
  }
  return nullptr;
}

// The variable's value for a checked number: whole units (bytes) for a scaled flag.
inline std::string tuning_value(const TuningFlag& f, double v) {
  if (f.scale != 1) return std::to_string(static_cast<long long>(v * f.scale));
  return number_text(v);
}

}  // namespace hora::cli
