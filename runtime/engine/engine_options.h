// The engine's tuning knobs, with their defaults. from_environment() is the one place that reads
// the engine's HORA_* variables (horarun's --cycle-time-ms, --fusion-threshold-mb, ... set them);
// the Engine itself never calls getenv.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace hora::detail::engine {

struct EngineOptions {
  // HORA_CYCLE_TIME_MS=5. A waiting caller never waits for a tick (cycles run back to back
  // while it waits), so the tick only decides how soon submitted ops start moving on their own;
  // at 1 ms the idle ticks' exchanges cost fashion_mnist's async path more than at 5 ms on
  // 2 cores (docs/environment.md has the figures).
  static constexpr std::chrono::microseconds kDefaultCycleTime{5000};
  static constexpr std::size_t kDefaultCacheCapacity = 1024;          // HORA_CACHE_CAPACITY
  static constexpr std::size_t kDefaultFusionThreshold = 128u << 20;  // HORA_FUSION_THRESHOLD
  static constexpr std::chrono::milliseconds kDefaultStallWarning{
      60'000};  // HORA_STALL_CHECK_SECONDS
  static constexpr std::chrono::milliseconds kDefaultStallShutdown{
      0};  // HORA_STALL_SHUTDOWN_SECONDS

  // How often ranks exchange what is ready. Longer cycles fuse more, shorter ones add less latency.
  std::chrono::microseconds cycle_time = kDefaultCycleTime;
  // Agreed responses remembered (bits in the per-cycle bit vector); 0 disables the cache.
  std::size_t cache_capacity = kDefaultCacheCapacity;
  // Largest fusion buffer in bytes; 0 disables fusion.
  std::size_t fusion_threshold = kDefaultFusionThreshold;
  // Stall check: warn about names some ranks submitted and others did not.
  bool stall_check = true;
  std::chrono::milliseconds stall_warning_time = kDefaultStallWarning;
  // Fail stalled ops with hora::TimeoutError after this long; 0 = never.
  std::chrono::milliseconds stall_shutdown_time = kDefaultStallShutdown;
  // Chrome trace written by rank 0; empty = no timeline.
  std::string timeline_path;
  bool timeline_mark_cycles = false;

  // For error messages: the host this rank runs on (WorldInfo::hostname). Not from the environment.
  std::string hostname;

  // Reads HORA_CYCLE_TIME_MS (milliseconds, fractions allowed), HORA_CACHE_CAPACITY (entries),
  // HORA_FUSION_THRESHOLD (bytes), HORA_STALL_CHECK_SECONDS, HORA_STALL_CHECK_DISABLE (1/0),
  // HORA_STALL_SHUTDOWN_SECONDS (seconds, fractions allowed), HORA_TIMELINE (path),
  // HORA_TIMELINE_MARK_CYCLES (1/0); unset or empty variables keep the defaults. A malformed
  // value throws hora::UsageError naming the variable, its value and what was expected.
  static EngineOptions from_environment();
  // Run first on the engine's thread (the process installs its alternate signal stack there,
  // runtime/process/crash_report.h); empty: nothing.
  std::function<void()> on_thread_start;
};

}  // namespace hora::detail::engine
