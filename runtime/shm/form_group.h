// Forming a host's shared-memory group at init: local rank 0 names the segment (from the job
// secret's hash, the host index, its pid and a counter: segment.h) and publishes the name
// through the rendezvous under "hora/shm/<host_index>/<purpose>/<n>", n counting the groups of
// that purpose this local rank formed through this rendezvous server (a counter in its store),
// so an init() after shutdown() never reads an earlier init()'s name; the others read it and
// open the segment (docs/shm.md). Throws hora::Error subclasses (TimeoutError past `deadline`).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "runtime/core/world.h"
#include "runtime/shm/shm_group.h"

namespace hora::rdv {
class Client;
}

namespace hora::detail::shm {

// purpose: "user" (the blocking collectives) or "engine" (the async engine's own group).
// aborted: the launcher's abort reason, if any (ShmOptions::aborted); may be empty.
std::shared_ptr<ShmGroup> form_group(const WorldInfo& world, rdv::Client& client,
                                     std::chrono::steady_clock::time_point deadline,
                                     const char* purpose,
                                     std::function<std::optional<std::string>()> aborted = {});

}  // namespace hora::detail::shm
