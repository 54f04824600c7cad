#include "cli/output/log.h"

#include <spdlog/spdlog.h>

#include "cli/output/log_sink.h"

namespace hora::cli {
namespace {

// The logger `name` writing to LogSink (cli/output/log_sink.h), registered before any
// component asks hora::named_logger (common/logger.h) for it, so theirs is this one; given
// horarun's pattern and level when this is the first to ask for it.
std::shared_ptr<spdlog::logger> make(const char* name, const char* pattern,
                                     spdlog::level::level_enum level) {
  if (auto existing = spdlog::get(name)) {
    // Created by a component first (with a stderr sink): its lines must take the same path.
    if (existing->sinks().size() != 1 ||
        std::dynamic_pointer_cast<LogSink>(existing->sinks()[0]) == nullptr) {
      existing->sinks() = {std::make_shared<LogSink>(2)};
      existing->set_pattern(pattern);
    }
    return existing;
  }
  auto l = std::make_shared<spdlog::logger>(name, std::make_shared<LogSink>(2));
  try {
    spdlog::register_logger(l);
  } catch (const spdlog::spdlog_ex&) {
    return make(name, pattern, level);  // registered meanwhile by another thread
  }
  l->set_pattern(pattern);
  l->set_level(level);
  l->flush_on(spdlog::level::trace);  // lines must not sit in a buffer behind rank output
  return l;
}

}  // namespace

std::shared_ptr<spdlog::logger> launcher_log() {
  static std::shared_ptr<spdlog::logger> logger =
      make("launcher", "horarun: %l: %v", spdlog::level::warn);
  return logger;
}

void configure_logging(bool verbose) {
  launcher_log()->set_level(verbose ? spdlog::level::info : spdlog::level::warn);
  make("rendezvous", "horarun: rendezvous: %l: %v", spdlog::level::err)
      ->set_level(verbose ? spdlog::level::info : spdlog::level::err);
  // Registered here first, so ssh/log.h finds it: the SSH layer's notices (a host key recorded,
  // a connection lost) read like the launcher's own lines. A recorded host key is shown always,
  // as ssh(1) does ("Permanently added ...").
  make("ssh", "horarun: ssh: %l: %v", spdlog::level::info);
}

}  // namespace hora::cli
