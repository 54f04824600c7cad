// Which allreduces run on Gloo pairs in sync mode (HORA_GLOO_SYNC, HORA_GLOO_SYNC_BYTES;
// docs/environment.md, docs/architecture.md "Small allreduces on sync pairs").
//
// A sync pair reads in the caller's thread instead of handing every receive to the device
// thread (mesh_context.h). build_mesh() then gives the global, engine and cross groups a second
// context whose pairs are in sync mode, and an allreduce of at most max_bytes runs there
// (sync_allreduce.h); larger ones stay on the async contexts. Every rank must use the same
// max_bytes (the mesh exchange checks it); busy polling is each rank's own choice.
//
// Header-only: runtime/meson.build lists the backend's sources, and this branch may not touch it.
#pragma once

#include <sched.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <hora/error.h>

#include "common/job_environment.h"
#include "runtime/core/world.h"

namespace hora::detail::gloo {

inline constexpr const char* kSyncModeVariable = job_env::kGlooSync;
inline constexpr const char* kSyncBytesVariable = job_env::kGlooSyncBytes;
// Above this a blocking write of one side could wait for the other side, which is writing too
// (both send before they receive): the socket buffers (net.core.wmem_max, 212992 by default)
// must hold one message.
inline constexpr std::size_t kSyncMaxBytesLimit = 128 * 1024;
inline constexpr std::size_t kSyncDefaultMaxBytes = 64 * 1024;
// The twins double the pairs between hosts (docs/architecture.md, "Scale": ports run out near
// 1 700 ranks without them); auto leaves larger jobs on the async pairs alone.
inline constexpr int kSyncAutoMaxRanks = 512;

struct SyncPolicy {
  std::size_t max_bytes = 0;  // 0: no sync contexts
  bool busy_poll = false;
  // Busy polling asked for with no core to spare (as many ranks on this host as usable CPUs,
  // or more): build_mesh() warns.
  bool oversubscribed = false;
  std::string reason;  // how it was chosen, for the debug log
};

// CPUs this process may run on (its affinity mask), at least 1.
inline int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// `lookup` reads a variable (nullptr when unset); `cpus` is usable_cpus() outside tests.
// Throws hora::UsageError for a value it does not know.
template <typename Lookup>
SyncPolicy read_sync_policy(const WorldInfo& world, Lookup&& lookup, int cpus) {
  SyncPolicy policy;
  const char* mode_text = lookup(kSyncModeVariable);
  const std::string_view mode = mode_text ? mode_text : "auto";
  auto bad = [&](const char* variable, std::string_view value, const char* expected) {
    throw UsageError(fmt::format("rank {} on {}: {}={} is not {}; unset it for the default",
                                 world.rank, world.hostname, variable, value, expected),
                     world.rank, world.hostname);
  };
  if (mode == "0" || mode == "off") {
    policy.reason = fmt::format("{}={}", kSyncModeVariable, mode);
    return policy;
  }
  if ((mode == "auto" || mode.empty()) && world.size > kSyncAutoMaxRanks) {
    policy.reason = fmt::format(
        "{} unset or auto: {} ranks, more than {} (the sync pairs would "
        "double the job's connections)",
        kSyncModeVariable, world.size, kSyncAutoMaxRanks);
    return policy;
  }
  if (mode == "auto" || mode.empty()) {
    // Measured (docs/architecture.md): sleeping reads beat busy polling on a shared 2-core host,
    // and a spinning rank takes the core its peers and the device threads need.
    policy.reason = fmt::format("{} unset or auto: sleeping reads; {}=busy spins instead",
                                kSyncModeVariable, kSyncModeVariable);
  } else if (mode == "1" || mode == "on") {
    policy.reason = fmt::format("{}={}: sleeping reads", kSyncModeVariable, mode);
  } else if (mode == "busy") {
    policy.busy_poll = true;
    policy.oversubscribed = world.local_size >= cpus;
    policy.reason = fmt::format("{}=busy: busy polling, {} ranks on this host, {} usable CPUs",
                                kSyncModeVariable, world.local_size, cpus);
  } else {
    bad(kSyncModeVariable, mode, "auto, 0 (off), 1 (on) or busy");
  }
  policy.max_bytes = kSyncDefaultMaxBytes;
  if (const char* bytes = lookup(kSyncBytesVariable)) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(bytes, &end, 10);
    if (end == bytes || *end != '\0' || errno != 0 || bytes[0] == '-' ||
        value > kSyncMaxBytesLimit) {
      bad(kSyncBytesVariable, bytes,
          fmt::format("a byte count from 0 to {}", kSyncMaxBytesLimit).c_str());
    }
    policy.max_bytes = static_cast<std::size_t>(value);
  }
  if (policy.max_bytes == 0) policy.busy_poll = policy.oversubscribed = false;
  return policy;
}

inline SyncPolicy read_sync_policy(const WorldInfo& world) {
  return read_sync_policy(
      world, [](const char* name) { return std::getenv(name); }, usable_cpus());
}

}  // namespace hora::detail::gloo
