#include "runtime/src/log.h"

#include <cstdlib>
#include <memory>
#include <string>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "runtime/src/env.h"

namespace hora::detail {
namespace {

spdlog::level::level_enum level_from_env() {
  const char* text = std::getenv(env::kLogLevel);
  if (text == nullptr || *text == '\0') return spdlog::level::warn;
  const std::string value = text;
  if (value == "trace") return spdlog::level::trace;
  if (value == "debug") return spdlog::level::debug;
  if (value == "info") return spdlog::level::info;
  if (value == "warning" || value == "warn") return spdlog::level::warn;
  if (value == "error") return spdlog::level::err;
  if (value == "critical" || value == "fatal") return spdlog::level::critical;
  if (value == "off") return spdlog::level::off;
  // A bad log level must not stop a training job; say so once and keep the default.
  std::fprintf(stderr, "hora: ignoring %s='%s' (expected trace, debug, info, warning or error)\n",
               env::kLogLevel, text);
  return spdlog::level::warn;
}

}  // namespace

spdlog::logger& log() {
  // Created on first use and never destroyed: the atexit shutdown may still log after static
  // destructors of other translation units have run.
  static spdlog::logger* const logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto* created = new spdlog::logger("runtime", std::move(sink));
    created->set_pattern("hora [%H:%M:%S.%e] [%n] [%l] %v");
    created->set_level(level_from_env());
    return created;
  }();
  return *logger;
}

}  // namespace hora::detail
