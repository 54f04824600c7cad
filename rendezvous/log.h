// The "rendezvous" spdlog logger shared by the server and the client.
#pragma once

#include <memory>

#include <spdlog/logger.h>

namespace hora::rdv {

// Returns the logger named "rendezvous", creating it (stderr sink, the registry's global level)
// on first use. If the launcher or runtime registered a logger of that name first, that one is
// used, so they control its sinks and level. Thread-safe.
std::shared_ptr<spdlog::logger> logger();

}  // namespace hora::rdv
