#include "rendezvous/log.h"

#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace hora::rdv {

std::shared_ptr<spdlog::logger> logger() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (auto existing = spdlog::get("rendezvous")) return existing;
  try {
    return spdlog::stderr_logger_mt("rendezvous");
  } catch (const spdlog::spdlog_ex&) {
    // Someone outside this mutex registered it between get() and here: use theirs.
    return spdlog::get("rendezvous");
  }
}

}  // namespace hora::rdv
