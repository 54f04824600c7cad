#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>

#include "cli/base/errors.h"
#include "cli/output/output.h"
#include "test/read_file.h"

using namespace hora::cli;

using hora::test::slurp;

namespace {

// A pipe whose read end we drain after writing (small amounts fit in the pipe buffer).
struct Capture {
  int fds[2];
  Capture() { REQUIRE(::pipe2(fds, O_CLOEXEC) == 0); }
  ~Capture() {
    ::close(fds[0]);
    if (fds[1] >= 0) ::close(fds[1]);
  }
  std::string take() {
    ::close(fds[1]);
    fds[1] = -1;
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
    return out;
  }
};

std::filesystem::path temp_dir() {
  char tmpl[] = "/tmp/hora_output_test.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

}  // namespace

TEST_CASE("lines go to stdout/stderr with horovodrun's prefixes") {
  Capture out, err;
  Output o(OutputOptions{}, 2, out.fds[1], err.fds[1]);
  o.line(0, Stream::kStdout, "hello");
  o.line(1, Stream::kStderr, "oops");
  o.line(1, Stream::kStdout, "");
  o.launcher_message("rank 1 on localhost exited with code 3");
  CHECK(out.take() == "[0]<stdout>:hello\n[1]<stdout>:\n");
  CHECK(err.take() == "[1]<stderr>:oops\nhorarun: rank 1 on localhost exited with code 3\n");
}

TEST_CASE("--prefix-output-with-timestamp puts asctime()'s layout first") {
  Capture out, err;
  Output o(OutputOptions{true, ""}, 1, out.fds[1], err.fds[1]);
  o.line(0, Stream::kStdout, "x");
  const std::string text = out.take();
  INFO(text);
  CHECK(std::regex_match(
      text,
      std::regex(R"([A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d \d{4}\[0\]<stdout>:x\n)")));
}

TEST_CASE("--output-filename writes DIR/rank.N/stdout and stderr, and the terminal still gets it") {
  const auto dir = temp_dir() / "logs";
  {
    Capture out, err;
    Output o(OutputOptions{false, dir.string()}, 3, out.fds[1], err.fds[1]);
    // What the supervisor does: the raw bytes to the file, the split lines to the terminal.
    o.raw(2, Stream::kStdout, "a\nb\n");
    o.line(2, Stream::kStdout, "a");
    o.line(2, Stream::kStdout, "b");
    o.raw(0, Stream::kStderr, "e\n");
    o.line(0, Stream::kStderr, "e");
    CHECK(out.take() == "[2]<stdout>:a\n[2]<stdout>:b\n");
    CHECK(err.take() == "[0]<stderr>:e\n");
  }
  // horovodrun's files: the terminal's prefix before every line.
  CHECK(slurp(dir / "rank.2" / "stdout") == "[2]<stdout>:a\n[2]<stdout>:b\n");
  CHECK(slurp(dir / "rank.0" / "stderr") == "[0]<stderr>:e\n");
  CHECK(slurp(dir / "rank.1" / "stdout").empty());
  CHECK(std::filesystem::exists(dir / "rank.1" / "stderr"));
  std::filesystem::remove_all(dir.parent_path());
}

TEST_CASE("--output-filename files are horovodrun's: long lines whole, CR ends a line") {
  const auto dir = temp_dir();
  // A 1 MiB line (sixteen 64 KiB terminal pieces), a line of exactly 64 KiB, NUL and CR bytes,
  // and an unterminated last line; handed over in uneven chunks as pipe reads would.
  std::string written(1u << 20, 'x');
  written += '\n';
  written += std::string(64 * 1024, 'y');
  written += std::string("\nnul\0cr\r\n", 9);
  written += std::string_view("\0", 1);
  written += "last line without newline";
  // What horovodrun's prefix_connection writes: a prefix before each piece ending at \n or \r.
  const std::string p = "[1]<stdout>:";
  std::string want = p + std::string(1u << 20, 'x') + "\n" + p + std::string(64 * 1024, 'y') +
                     "\n" + p + std::string("nul\0cr\r", 7) + p + "\n" + p + std::string("\0", 1) +
                     "last line without newline";
  {
    Capture out, err;
    Output o(OutputOptions{false, dir.string()}, 2, out.fds[1], err.fds[1]);
    std::string_view rest(written);
    for (std::size_t chunk = 1; !rest.empty(); chunk = chunk * 3 + 7) {
      const std::size_t n = std::min(chunk, rest.size());
      o.raw(1, Stream::kStdout, rest.substr(0, n));
      rest.remove_prefix(n);
    }
    o.raw(1, Stream::kStderr, "");
    o.raw(1, Stream::kStderr, "err without newline");
    o.line(1, Stream::kStdout, "terminal only");  // line() no longer touches the files
    CHECK(out.take() == "[1]<stdout>:terminal only\n");
    CHECK(err.take().empty());  // raw() never writes to the terminal
  }
  const std::string file = slurp(dir / "rank.1" / "stdout");
  CHECK(file.size() == want.size());
  CHECK(file == want);
  CHECK(slurp(dir / "rank.1" / "stderr") == "[1]<stderr>:err without newline");
  CHECK(slurp(dir / "rank.0" / "stdout").empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("without --output-filename raw() writes nothing anywhere") {
  Capture out, err;
  Output o(OutputOptions{}, 1, out.fds[1], err.fds[1]);
  o.raw(0, Stream::kStdout, "bytes\n");
  o.raw(0, Stream::kStderr, "bytes\n");
  CHECK(out.take().empty());
  CHECK(err.take().empty());
}

TEST_CASE("an --output-filename that cannot be created names the path") {
  CHECK_THROWS_WITH(Output(OutputOptions{false, "/proc/no/such/dir"}, 1),
                    Catch::Matchers::Contains("/proc/no/such/dir"));
}

TEST_CASE("a closed terminal does not stop the file copy") {
  const auto dir = temp_dir();
  Capture out, err;
  Output o(OutputOptions{false, dir.string()}, 1, out.fds[1], err.fds[1]);
  ::close(out.fds[0]);
  out.fds[0] = ::open("/dev/null", O_RDONLY);  // keep the destructor's close harmless
  ::signal(SIGPIPE, SIG_IGN);
  o.line(0, Stream::kStdout, "still here");
  o.raw(0, Stream::kStdout, "still here\n");
  CHECK(slurp(dir / "rank.0" / "stdout") == "[0]<stdout>:still here\n");
  std::filesystem::remove_all(dir);
}

namespace {

// Reads `fd` to EOF on a thread, once started.
struct SlowReader {
  int fd;
  std::string data;
  std::thread thread;
  void start() {
    thread = std::thread([this] {
      char buf[65536];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) data.append(buf, static_cast<std::size_t>(n));
    });
  }
  void join() {
    if (thread.joinable()) thread.join();
  }
};

}  // namespace

TEST_CASE("with an io_context, a reader that takes nothing does not hold line() up") {
  boost::asio::io_context io;
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Capture err;
  SlowReader reader{p[0], {}, {}};
  // 2 MiB of lines: thirty times what the pipe holds.
  const std::string text(1000, 'x');
  constexpr int kLines = 2000;
  std::atomic<bool> submitted{false};
  // A watchdog starts the reader after 10 s, so a line() that waits for the reader ends the
  // test (with a failure below) instead of hanging it.
  std::thread watchdog([&] {
    for (int i = 0; i < 1000 && !submitted; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    reader.start();
  });
  {
    Output o(OutputOptions{}, 1, p[1], err.fds[1], &io);
    for (int i = 0; i < kLines; ++i) o.line(0, Stream::kStdout, fmt::format("{} {}", i, text));
    submitted = true;
    CHECK(o.pending(Stream::kStdout) > 1000000);  // queued, not written
    watchdog.join();
    // The reader drains the pipe; the io_context writes the rest as room appears.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (o.pending(Stream::kStdout) > 0 && std::chrono::steady_clock::now() < deadline) {
      io.run_for(std::chrono::milliseconds(50));
      io.restart();
    }
    CHECK(o.pending(Stream::kStdout) == 0);
  }
  ::close(p[1]);  // the reader sees EOF once Output's own description is closed too
  reader.join();
  ::close(p[0]);
  // Every line arrived, whole and in order.
  std::string expected;
  for (int i = 0; i < kLines; ++i) expected += fmt::format("[0]<stdout>:{} {}\n", i, text);
  CHECK(reader.data.size() == expected.size());
  CHECK(reader.data == expected);
}

TEST_CASE("flush() waits for a slow reader, and gives up on one that takes nothing") {
  boost::asio::io_context io;
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Capture err;
  const std::string text(1000, 'y');
  SECTION("slow reader: everything arrives") {
    SlowReader reader{p[0], {}, {}};
    {
      Output o(OutputOptions{}, 1, p[1], err.fds[1], &io);
      for (int i = 0; i < 500; ++i) o.line(0, Stream::kStdout, text);
      reader.start();
      o.flush(std::chrono::seconds(10));
      CHECK(o.pending(Stream::kStdout) == 0);
    }
    ::close(p[1]);
    reader.join();
    CHECK(reader.data.size() == 500 * (text.size() + 13));
  }
  SECTION("stalled reader: flush() returns after the stall time and drops the rest") {
    Output o(OutputOptions{}, 1, p[1], err.fds[1], &io);
    for (int i = 0; i < 500; ++i) o.line(0, Stream::kStdout, text);
    const auto t0 = std::chrono::steady_clock::now();
    o.flush(std::chrono::milliseconds(200));
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(o.pending(Stream::kStdout) == 0);
    CHECK(took < std::chrono::seconds(5));  // a deadline, not a speed target: 200 ms stall
    o.line(0, Stream::kStdout, "after");    // a given-up stream takes nothing more
    CHECK(o.pending(Stream::kStdout) == 0);
    ::close(p[1]);
  }
  ::close(p[0]);
}

TEST_CASE("a regular file as stdout is appended to, not reopened") {
  const auto dir = temp_dir();
  const auto file = dir / "log";
  { std::ofstream(file) << "before\n"; }
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  REQUIRE(fd >= 0);
  boost::asio::io_context io;
  Capture err;
  {
    Output o(OutputOptions{}, 1, fd, err.fds[1], &io);
    o.line(0, Stream::kStdout, "after");
  }
  ::close(fd);
  CHECK(slurp(file) == "before\n[0]<stdout>:after\n");
  std::filesystem::remove_all(dir);
}

// mpirun's --tag-output and --merge-stderr-to-stdout.
TEST_CASE("--tag-output tags lines as Open MPI does; --merge-stderr-to-stdout moves stderr") {
  {
    Capture out, err;
    OutputOptions options;
    options.tag_jobid = true;
    Output o(options, 2, out.fds[1], err.fds[1]);
    o.line(1, Stream::kStdout, "hi");
    o.line(0, Stream::kStderr, "oops");
    CHECK(out.take() == "[1,1]<stdout>:hi\n");
    CHECK(err.take() == "[1,0]<stderr>:oops\n");
  }
  {
    Capture out, err;
    OutputOptions options;
    options.merge_stderr = true;
    Output o(options, 1, out.fds[1], err.fds[1]);
    o.line(0, Stream::kStdout, "a");
    o.line(0, Stream::kStderr, "b");
    o.launcher_message("own");  // horarun's own messages stay on its stderr
    CHECK(out.take() == "[0]<stdout>:a\n[0]<stderr>:b\n");
    CHECK(err.take() == "horarun: own\n");
  }
}
