#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "cli/errors.h"
#include "cli/output.h"

using namespace hora::cli;

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

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

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
  CHECK(std::regex_match(text, std::regex(R"([A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d \d{4}\[0\]<stdout>:x\n)")));
}

TEST_CASE("--output-filename writes DIR/rank.N/stdout and stderr, and the terminal still gets it") {
  const auto dir = temp_dir() / "logs";
  {
    Capture out, err;
    Output o(OutputOptions{false, dir.string()}, 3, out.fds[1], err.fds[1]);
    o.line(2, Stream::kStdout, "a");
    o.line(2, Stream::kStdout, "b");
    o.line(0, Stream::kStderr, "e");
    CHECK(out.take() == "[2]<stdout>:a\n[2]<stdout>:b\n");
    CHECK(err.take() == "[0]<stderr>:e\n");
  }
  CHECK(slurp(dir / "rank.2" / "stdout") == "a\nb\n");
  CHECK(slurp(dir / "rank.0" / "stderr") == "e\n");
  CHECK(slurp(dir / "rank.1" / "stdout").empty());
  CHECK(std::filesystem::exists(dir / "rank.1" / "stderr"));
  std::filesystem::remove_all(dir.parent_path());
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
  CHECK(slurp(dir / "rank.0" / "stdout") == "still here\n");
  std::filesystem::remove_all(dir);
}
