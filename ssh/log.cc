#include "ssh/log.h"

#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace hora::ssh {

std::shared_ptr<spdlog::logger> logger() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (auto existing = spdlog::get("ssh")) return existing;
  try {
    return spdlog::stderr_logger_mt("ssh");
  } catch (const spdlog::spdlog_ex&) {
    // Registered by someone else between get() and here: use theirs.
    return spdlog::get("ssh");
  }
}

}  // namespace hora::ssh
