// Running a program (horarun, usually) from a Catch2 test: its output collected, a deadline
// enforced, and the environment variables meson test sets read. Header-only, for the tests that
// drive whole jobs (test/runtime/engine/async_job_test.cc, test/runtime/api/reinit_test.cc).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace hora::test {

struct JobResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr, as horarun prefixes them
};

// The value of `name` (meson test sets it); fails the test when it is unset or empty.
inline std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') FAIL(name << " is not set (meson test sets it)");
  return v;
}

// Runs argv with extra environment variables; kills it (and fails) after `timeout`.
inline JobResult run_job(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env,
                         std::chrono::seconds timeout) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  JobResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;  // EINTR or the deadline
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO(r.output);
  REQUIRE_FALSE(timed_out);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// How many times `needle` occurs in `text` (overlapping occurrences count).
inline int count_of(const std::string& text, const std::string& needle) {
  int c = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++c;
  }
  return c;
}

}  // namespace hora::test
