// cli/output/log_sink.h: horarun's log lines are queued by Output while attached (a reader that
// takes nothing cannot block the logger), and written directly otherwise.
#include "cli/output/log_sink.h"

#include <fcntl.h>
#include <spdlog/logger.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>

#include "cli/output/output.h"

using namespace hora::cli;

namespace {

struct Pipe {
  int fds[2];
  Pipe() { REQUIRE(::pipe2(fds, O_CLOEXEC) == 0); }
  ~Pipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  std::string read_some() {
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }
};

std::shared_ptr<spdlog::logger> logger_on(int fd) {
  auto l = std::make_shared<spdlog::logger>("log_sink_test", std::make_shared<LogSink>(fd));
  l->set_pattern("horarun: %l: %v");
  return l;
}

}  // namespace

TEST_CASE("attached, lines beyond what the unread pipe holds are queued, not written blocking") {
  Pipe err;
  Pipe out;
  boost::asio::io_context io;
  Output output(OutputOptions{}, 1, out.fds[1], err.fds[1], &io);
  auto log = logger_on(err.fds[1]);
  {
    const LogSinkAttachment attached(output);
    const std::string text(100, 'x');
    // 400 KB: six times a pipe's 64 KiB. A blocking write would never return here.
    for (int i = 0; i < 4000; ++i) log->warn("{} {}", i, text);
    CHECK(output.pending(Stream::kStderr) > 0);
  }
  CHECK(err.read_some().rfind("horarun: warning: 0 xxx", 0) == 0);
  output.flush(std::chrono::milliseconds(0));  // the reader is gone: drop the rest
}

TEST_CASE("not attached, or on another thread, lines are written to the descriptor") {
  Pipe err;
  auto log = logger_on(err.fds[1]);
  log->error("before any output");
  CHECK(err.read_some() == "horarun: error: before any output\n");

  // Attached to an Output on this thread: another thread's line bypasses it.
  Pipe queued;
  boost::asio::io_context io;
  Output output(OutputOptions{}, 1, queued.fds[1], queued.fds[1], &io);
  const LogSinkAttachment attached(output);
  std::thread([&] { log->error("from another thread"); }).join();
  CHECK(err.read_some() == "horarun: error: from another thread\n");
  CHECK(output.pending(Stream::kStderr) == 0);
}
