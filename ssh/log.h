// The "ssh" spdlog logger used by this library (host key recorded, changed key accepted under
// StrictHostKeyChecking=no, connection lost).
#pragma once

#include <memory>

#include <spdlog/logger.h>

namespace hora::ssh {

// Returns the logger named "ssh", creating it (stderr, the registry's global level) on first use.
// If the launcher registered a logger of that name first, that one is used. Thread-safe.
std::shared_ptr<spdlog::logger> logger();

}  // namespace hora::ssh
