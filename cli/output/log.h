// horarun's loggers, on stderr through LogSink (cli/output/log_sink.h: non-blocking and bounded
// while a job runs): "launcher" (`horarun: <level>: <message>`) and the rendezvous
// server's "rendezvous" (registered here first, so the server uses it; see rendezvous/log.h).
// Without --verbose the launcher shows warnings and errors, and the rendezvous server only
// errors: what it would warn about (a rank disconnecting, the abort) the launcher reports
// itself, once, with the rank's host.
#pragma once

#include <memory>

#include <spdlog/logger.h>

namespace hora::cli {

// Creates (once) and sets the levels of both loggers.
void configure_logging(bool verbose);

// The "launcher" logger (created with the default levels if configure_logging was not called).
std::shared_ptr<spdlog::logger> launcher_log();

}  // namespace hora::cli
