#include "common/logger.h"

#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace hora {

std::shared_ptr<spdlog::logger> named_logger(const char* name) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (auto existing = spdlog::get(name)) return existing;
  try {
    return spdlog::stderr_logger_mt(name);
  } catch (const spdlog::spdlog_ex&) {
    // Registered by someone outside this mutex between get() and here: use theirs.
    return spdlog::get(name);
  }
}

}  // namespace hora
