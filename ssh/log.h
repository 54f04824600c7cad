// The "ssh" spdlog logger used by this library (host key recorded, changed key accepted under
// StrictHostKeyChecking=no, connection lost).
#pragma once

#include <memory>

#include <spdlog/logger.h>

#include "common/logger.h"

namespace hora::ssh {

// The logger named "ssh" (see hora::named_logger): if the launcher registered one of that name
// first, theirs is used.
inline std::shared_ptr<spdlog::logger> logger() { return named_logger("ssh"); }

}  // namespace hora::ssh
