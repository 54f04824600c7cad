// HORA_GLOO_SYNC and HORA_GLOO_SYNC_BYTES (runtime/gloo/sync_policy.h): which allreduces go to
// Gloo's sync pairs, and when a rank busy-polls. The pairs themselves are tested in real jobs
// (test/integration/gloo_sync_test.sh).
#include "runtime/gloo/sync_policy.h"

#include <map>
#include <string>
#include <vector>

#include <hora/error.h>
#include <catch2/catch.hpp>

using hora::detail::WorldInfo;
using hora::detail::gloo::kSyncDefaultMaxBytes;
using hora::detail::gloo::kSyncMaxBytesLimit;
using hora::detail::gloo::read_sync_policy;
using hora::detail::gloo::SyncPolicy;

namespace {

SyncPolicy policy(const std::map<std::string, std::string>& env, int local_size, int cpus) {
  WorldInfo world;
  world.rank = 3;
  world.hostname = "node7";
  world.size = 8;
  world.local_size = local_size;
  return read_sync_policy(
      world,
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      cpus);
}

std::string usage_message(const std::map<std::string, std::string>& env) {
  try {
    policy(env, 2, 8);
  } catch (const hora::UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

}  // namespace

TEST_CASE("by default small allreduces use sync pairs with sleeping reads", "[sync_policy]") {
  for (int cpus : {1, 2, 64}) {
    for (const std::map<std::string, std::string>& env :
         {std::map<std::string, std::string>{}, {{"HORA_GLOO_SYNC", "auto"}}}) {
      const SyncPolicy p = policy(env, 2, cpus);
      CHECK(p.max_bytes == kSyncDefaultMaxBytes);
      // Busy polling is never the default: it was slower where measured, and burns a core.
      CHECK_FALSE(p.busy_poll);
      CHECK_FALSE(p.oversubscribed);
    }
  }
}

TEST_CASE("by default jobs of more than 512 ranks keep every pair asynchronous", "[sync_policy]") {
  WorldInfo world;
  world.size = hora::detail::gloo::kSyncAutoMaxRanks + 1;
  auto unset = [](const char*) -> const char* { return nullptr; };
  const SyncPolicy big = read_sync_policy(world, unset, 64);
  CHECK(big.max_bytes == 0);
  CHECK_THAT(big.reason, Catch::Contains("more than 512"));
  auto on = [](const char* name) -> const char* {
    return std::string(name) == "HORA_GLOO_SYNC" ? "1" : nullptr;
  };
  CHECK(read_sync_policy(world, on, 64).max_bytes == kSyncDefaultMaxBytes);  // asked for
}

TEST_CASE("HORA_GLOO_SYNC forces each mode, and 0 turns the sync pairs off", "[sync_policy]") {
  for (const char* off : {"0", "off"}) {
    const SyncPolicy p = policy({{"HORA_GLOO_SYNC", off}, {"HORA_GLOO_SYNC_BYTES", "100"}}, 1, 8);
    CHECK(p.max_bytes == 0);
    CHECK_FALSE(p.busy_poll);
  }
  for (const char* on : {"1", "on"}) {
    const SyncPolicy p = policy({{"HORA_GLOO_SYNC", on}}, 1, 8);
    CHECK(p.max_bytes == kSyncDefaultMaxBytes);
    CHECK_FALSE(p.busy_poll);  // even with cores to spare
  }
  const SyncPolicy busy = policy({{"HORA_GLOO_SYNC", "busy"}}, 16, 2);
  CHECK(busy.max_bytes == kSyncDefaultMaxBytes);
  CHECK(busy.busy_poll);       // even oversubscribed: the user asked,
  CHECK(busy.oversubscribed);  // and build_mesh() warns
  CHECK_THAT(busy.reason, Catch::Contains("16 ranks on this host, 2 usable CPUs"));
  CHECK_FALSE(policy({{"HORA_GLOO_SYNC", "busy"}}, 2, 3).oversubscribed);
}

TEST_CASE("HORA_GLOO_SYNC_BYTES sets the threshold up to the limit", "[sync_policy]") {
  CHECK(policy({{"HORA_GLOO_SYNC_BYTES", "4096"}}, 1, 8).max_bytes == 4096);
  CHECK(policy({{"HORA_GLOO_SYNC_BYTES", std::to_string(kSyncMaxBytesLimit)}}, 1, 8).max_bytes ==
        kSyncMaxBytesLimit);
  const SyncPolicy zero = policy({{"HORA_GLOO_SYNC_BYTES", "0"}}, 1, 8);
  CHECK(zero.max_bytes == 0);
  CHECK_FALSE(zero.busy_poll);  // nothing to poll for
}

TEST_CASE("bad values are usage errors naming the variable, the rank and the choices",
          "[sync_policy]") {
  CHECK_THAT(usage_message({{"HORA_GLOO_SYNC", "yes"}}),
             Catch::Contains("rank 3 on node7: HORA_GLOO_SYNC=yes is not auto, 0 (off), 1 (on) "
                             "or busy"));
  const std::vector<std::string> bad_values{
      "", "-1", "12k", "1e3", std::to_string(kSyncMaxBytesLimit + 1), "99999999999999999999999"};
  for (const std::string& bad : bad_values) {
    INFO("HORA_GLOO_SYNC_BYTES=" << bad);
    CHECK_THAT(usage_message({{"HORA_GLOO_SYNC_BYTES", bad}}),
               Catch::Contains("HORA_GLOO_SYNC_BYTES=" + bad + " is not a byte count from 0 to " +
                               std::to_string(kSyncMaxBytesLimit)));
  }
}
