#include "runtime/engine/engine_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

#include <hora/error.h>

#include "common/job_environment.h"

namespace hora::detail::engine {
namespace {

// The longest stall check or stall shutdown time (as horarun's flags): longer would overflow the
// milliseconds it is kept in, and no job waits a month for a tensor.
constexpr double kMaxStallSeconds = 2592000;

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

[[noreturn]] void bad(const char* name, const std::string& value, const char* expected) {
  throw UsageError(std::string(name) + "='" + value + "' is not valid: expected " + expected +
                   " (unset it to use the default)");
}

double non_negative_number(const char* name, const std::string& value, const char* expected) {
  errno = 0;
  char* end = nullptr;
  double d = std::strtod(value.c_str(), &end);
  if (errno != 0 || end == value.c_str() || *end != '\0' || !std::isfinite(d) || d < 0) {
    bad(name, value, expected);
  }
  return d;
}

std::size_t non_negative_integer(const char* name, const std::string& value, const char* expected) {
  if (value.find_first_not_of("0123456789") != std::string::npos || value.size() > 19) {
    bad(name, value, expected);
  }
  return static_cast<std::size_t>(std::stoull(value));
}

bool flag(const char* name, const std::string& value) {
  if (value == "1" || value == "true" || value == "yes") return true;
  if (value == "0" || value == "false" || value == "no") return false;
  bad(name, value, "1 or 0");
}

}  // namespace

EngineOptions EngineOptions::from_environment() {
  EngineOptions o;
  if (auto v = env(job_env::kCycleTimeMs)) {
    double ms = non_negative_number(job_env::kCycleTimeMs, *v,
                                    "a positive number of milliseconds, e.g. 1 or 0.5");
    if (ms <= 0 || ms > 60'000) {
      bad(job_env::kCycleTimeMs, *v, "a positive number of milliseconds up to 60000");
    }
    o.cycle_time = std::chrono::microseconds(static_cast<long long>(std::llround(ms * 1000)));
    if (o.cycle_time.count() == 0) o.cycle_time = std::chrono::microseconds(1);
  }
  if (auto v = env(job_env::kCacheCapacity)) {
    o.cache_capacity = non_negative_integer(job_env::kCacheCapacity, *v,
                                            "a number of entries (0 disables the cache)");
    if (o.cache_capacity > (1u << 16)) {
      bad(job_env::kCacheCapacity, *v, "at most 65536 entries");
    }
  }
  if (auto v = env(job_env::kFusionThreshold)) {
    o.fusion_threshold = non_negative_integer(job_env::kFusionThreshold, *v,
                                              "a number of bytes (0 disables fusion)");
  }
  if (auto v = env(job_env::kStallCheckDisable))
    o.stall_check = !flag(job_env::kStallCheckDisable, *v);
  if (auto v = env(job_env::kStallCheckSeconds)) {
    double s = non_negative_number(job_env::kStallCheckSeconds, *v, "a positive number of seconds");
    if (s <= 0 || s > kMaxStallSeconds) {
      bad(job_env::kStallCheckSeconds, *v, "a positive number of seconds up to 2592000 (30 days)");
    }
    o.stall_warning_time = std::chrono::milliseconds(std::llround(s * 1000));
  }
  if (auto v = env(job_env::kStallShutdownSeconds)) {
    double s =
        non_negative_number(job_env::kStallShutdownSeconds, *v, "a number of seconds (0 = never)");
    if (s > kMaxStallSeconds) {
      bad(job_env::kStallShutdownSeconds, *v,
          "a number of seconds up to 2592000 (30 days; 0 = never)");
    }
    o.stall_shutdown_time = std::chrono::milliseconds(std::llround(s * 1000));
  }
  if (auto v = env(job_env::kTimeline)) o.timeline_path = *v;
  if (auto v = env(job_env::kTimelineMarkCycles)) {
    o.timeline_mark_cycles = flag(job_env::kTimelineMarkCycles, *v);
  }
  return o;
}

}  // namespace hora::detail::engine
