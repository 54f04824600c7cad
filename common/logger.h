// One named spdlog logger per component ("launcher", "ssh", "rendezvous", "runtime").
#pragma once

#include <memory>

#include <spdlog/logger.h>

namespace hora {

// Returns the logger registered under `name`, creating it on first use with a stderr sink and
// the registry's global level. A program that registers a logger of that name first (horarun
// does, with its own non-blocking sink) keeps its sinks and level. Thread-safe.
std::shared_ptr<spdlog::logger> named_logger(const char* name);

}  // namespace hora
