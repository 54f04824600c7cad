#include "runtime/nccl/unique_id.h"

#include <algorithm>

#include <fmt/format.h>
#include <hora/error.h>

#include "common/text.h"
#include "rendezvous/client.h"
#include "rendezvous/errors.h"

namespace hora::detail::nccl {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  // A deadline that has just passed still gets one short request, so the server (not this
  // process) reports what was missing.
  return std::max(left, std::chrono::milliseconds{1});
}

// Who is expected to publish the key of `group`, in words the user can act on.
std::string publisher(const CommGroup& group) {
  switch (group.scope) {
    case Scope::kGlobal: return "rank 0";
    case Scope::kLocal: return fmt::format("local rank 0 of host #{}", group.group);
    case Scope::kCross:
      return fmt::format("local rank {} of the first host that has one", group.group);
  }
  return "rank 0 of the communicator";
}

}  // namespace

CommGroup comm_group(const WorldInfo& world, Scope scope) {
  switch (scope) {
    case Scope::kGlobal: return {scope, 0, world.rank, world.size};
    case Scope::kLocal: return {scope, world.host_index, world.local_rank, world.local_size};
    case Scope::kCross: return {scope, world.local_rank, world.cross_rank, world.cross_size};
  }
  throw UsageError(fmt::format("{}: unknown scope {}", sized_who(world), static_cast<int>(scope)),
                   world.rank, world.hostname);
}

std::string unique_id_key(const CommGroup& group) {
  return fmt::format("nccl/{}/{}/uid", name_of(group.scope), group.group);
}

std::string describe(const CommGroup& group) {
  const char* unit = group.nranks == 1 ? "rank" : "ranks";
  switch (group.scope) {
    case Scope::kGlobal: return fmt::format("the global communicator ({} {})", group.nranks, unit);
    case Scope::kLocal:
      return fmt::format("the local communicator of host #{} ({} {})", group.group, group.nranks,
                         unit);
    case Scope::kCross:
      return fmt::format("the cross communicator of local rank {} ({} {})", group.group,
                         group.nranks, unit);
  }
  return "an NCCL communicator";
}

std::string sized_who(const WorldInfo& world) {
  return rank_name(world.rank, world.size, world.hostname);
}

UniqueId exchange_unique_id(rdv::Client* client, const WorldInfo& world, const CommGroup& group,
                            const std::function<UniqueId()>& get_unique_id,
                            Clock::time_point deadline) {
  if (group.nranks == 1) return get_unique_id();
  const std::string key = unique_id_key(group);
  if (client == nullptr) {
    throw UsageError(fmt::format("{}: cannot form {} without a rendezvous connection "
                                 "(was hora::init() called?)",
                                 sized_who(world), describe(group)),
                     world.rank, world.hostname);
  }
  // The step, for every message below.
  const std::string step =
      group.rank == 0
          ? fmt::format("publishing the NCCL unique id of {} (key {})", describe(group), key)
          : fmt::format(
                "waiting for the NCCL unique id of {} (key {}), which {} publishes on "
                "its first GPU collective of that scope",
                describe(group), key, publisher(group));
  try {
    if (group.rank == 0) {
      UniqueId id = get_unique_id();
      client->set(key, rdv::Bytes(id.begin(), id.end()), remaining(deadline));
      return id;
    }
    rdv::Bytes bytes = client->get(key, remaining(deadline));
    if (bytes.size() != kUniqueIdBytes) {
      throw MismatchError(
          fmt::format("{}: {}: the rendezvous holds {} bytes, expected {} (an ncclUniqueId); "
                      "were the ranks built against different NCCL versions?",
                      sized_who(world), step, bytes.size(), kUniqueIdBytes),
          world.rank, world.hostname);
    }
    UniqueId id;
    std::copy(bytes.begin(), bytes.end(), id.begin());
    return id;
  } catch (const rdv::TimeoutError& e) {
    throw TimeoutError(
        fmt::format("{}: timed out {}: {}. Every rank of the communicator must make the same "
                    "GPU collective; if they reach it far apart, raise HORA_TIMEOUT_SECONDS",
                    sized_who(world), step, e.what()),
        world.rank, world.hostname);
  } catch (const rdv::AbortedError& e) {
    throw AbortedError(fmt::format("{}: job aborted while {}: {}", sized_who(world), step,
                                   e.what()),
                       world.rank, world.hostname);
  } catch (const rdv::Error& e) {
    throw ConnectionError(fmt::format("{}: rendezvous {} failed while {}: {}", sized_who(world),
                                      client->server(), step, e.what()),
                          world.rank, world.hostname);
  }
}

}  // namespace hora::detail::nccl
