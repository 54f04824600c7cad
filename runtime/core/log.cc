#include "runtime/core/log.h"

#include <cstdlib>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "common/logger.h"
#include "runtime/core/env.h"

namespace hora::detail {
namespace {

constexpr const char kName[] = "runtime";

spdlog::level::level_enum level_from_env() {
  const char* text = std::getenv(env::kLogLevel);
  if (text == nullptr || *text == '\0') return spdlog::level::warn;
  const std::string value = text;
  if (value == "fatal") return spdlog::level::critical;  // hora's alias; spdlog has no "fatal"
  // spdlog's names (trace, debug, info, warning/warn, error/err, critical, off); it answers
  // "off" for a name it does not know.
  const auto level = spdlog::level::from_str(value);
  if (level != spdlog::level::off || value == "off") return level;
  // A bad log level must not stop a training job; say so once and keep the default.
  std::fprintf(stderr, "hora: ignoring %s='%s' (expected trace, debug, info, warning or error)\n",
               env::kLogLevel, text);
  return spdlog::level::warn;
}

}  // namespace

spdlog::logger& log() {
  // Created on first use (hora::named_logger, so a program that registered a "runtime" logger
  // first keeps its own) and never released: the atexit shutdown may still log after static
  // destructors of other translation units, spdlog's registry among them, have run.
  static std::shared_ptr<spdlog::logger>* const held = [] {
    const bool registered_by_program = spdlog::get(kName) != nullptr;
    auto* logger = new std::shared_ptr<spdlog::logger>(hora::named_logger(kName));
    if (!registered_by_program) {
      (*logger)->set_pattern("hora [%H:%M:%S.%e] [%n] [%l] %v");
      (*logger)->set_level(level_from_env());
    }
    return logger;
  }();
  return **held;
}

}  // namespace hora::detail
