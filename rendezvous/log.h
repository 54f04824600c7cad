// The "rendezvous" spdlog logger shared by the server and the client.
#pragma once

#include <memory>

#include <spdlog/logger.h>

#include "common/logger.h"

namespace hora::rdv {

// The logger named "rendezvous" (see hora::named_logger): if the launcher or runtime registered
// one of that name first, theirs is used, so they control its sinks and level.
inline std::shared_ptr<spdlog::logger> logger() { return named_logger("rendezvous"); }

}  // namespace hora::rdv
