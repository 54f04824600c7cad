// The runtime's spdlog logger ("runtime"), writing to stderr. Its level comes from
// HORA_LOG_LEVEL (trace, debug, info, warning, error; default warning), read once.
#pragma once

#include <spdlog/logger.h>

namespace hora::detail {

spdlog::logger& log();

}  // namespace hora::detail
