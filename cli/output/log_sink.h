// The spdlog sink of horarun's own loggers ("launcher", "rendezvous", "ssh"): while a job runs,
// their lines go through Output (cli/output/output.h), the same non-blocking, bounded path as
// rank output, so a reader that stops taking horarun's stderr cannot freeze the event loop (the
// rendezvous server, failure detection, SIGINT) in a blocking write. Before Output exists and
// after it is gone (option parsing, preflight, the verdict after flush) lines are written to the
// descriptor directly; nothing hostile can reach horarun then.
//
// Output is not thread-safe: lines logged from another thread than the one that attached it
// (the network discovery's server thread) are written directly, as before.
#pragma once

#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

namespace hora::cli {

class Output;

class LogSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit LogSink(int fd = 2) : fd_(fd) {}

  // From now on, lines logged on this thread by any LogSink go to `output` (stderr, queued
  // when the reader is slow). Pass nullptr to write directly again. Each logger has a sink of
  // its own (spdlog keeps the pattern in the sink), all sharing this target.
  static void attach(Output* output);

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}

 private:
  int fd_;
};

// Attaches `output` to the sink for its lifetime (declare it right after the Output).
class LogSinkAttachment {
 public:
  explicit LogSinkAttachment(Output& output) { LogSink::attach(&output); }
  ~LogSinkAttachment() { LogSink::attach(nullptr); }
  LogSinkAttachment(const LogSinkAttachment&) = delete;
  LogSinkAttachment& operator=(const LogSinkAttachment&) = delete;
};

}  // namespace hora::cli
