// Integration tests of the async engine inside libhora: real `horarun -np N` jobs of async_job
// (Gloo over loopback TCP, the launcher's rendezvous), checked from their output and timeline.
// HORARUN and ASYNC_JOB come from the environment (test/engine/meson.build sets them).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test/engine/json_reader.h"
#include "test/read_file.h"

using hora::test::slurp;

namespace {

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr, as horarun prefixes them
};

std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') FAIL(name << " is not set (meson test sets it)");
  return v;
}

// Runs argv with extra environment variables; kills it (and fails) after `timeout`.
Result run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
           std::chrono::seconds timeout) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  pid_t pid = ::fork();
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
  Result r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  bool timed_out = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
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

int count(const std::string& text, const std::string& needle) {
  int c = 0;
  for (std::size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + 1))
    ++c;
  return c;
}

}  // namespace

TEST_CASE("horarun: async collectives in different orders, cache, mismatch and timeline",
          "[integration]") {
  const int np = GENERATE(2, 3);
  const std::string timeline =
      "/tmp/hora_async_job_" + std::to_string(::getpid()) + "_" + std::to_string(np) + ".json";
  Result r = run({required_env("HORARUN"), "-np", std::to_string(np), "-H",
                  "localhost:" + std::to_string(np), required_env("ASYNC_JOB"), "all"},
                 {{"HORA_TIMELINE", timeline}}, std::chrono::seconds(120));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(count(r.output, "ASYNC_JOB_OK") == np);
  CHECK(count(r.output,
              "Mismatched allreduce tensor shapes for tensor 'mismatch': rank 0 sent 8 "
              "elements but rank " +
                  std::to_string(np - 1) + " sent 4") == np);
  hora::test::JsonValue doc = hora::test::parse_json(slurp(timeline));
  std::map<std::string, int> names;
  for (const auto& e : doc.array) names[e.find("name")->string]++;
  CHECK(names["NEGOTIATE_ALLREDUCE"] > 0);
  CHECK(names["MEMCPY_IN_FUSION_BUFFER"] > 0);
  CHECK(names["ALLGATHER"] == 1);
  CHECK(names["ALLTOALL"] == 1);
  std::remove(timeline.c_str());
}

TEST_CASE("horarun: the stall check warns and the stall shutdown fails the orphan op",
          "[integration]") {
  Result r = run({required_env("HORARUN"), "-np", "2", "-H", "localhost:2",
                  required_env("ASYNC_JOB"), "orphan"},
                 {{"HORA_STALL_CHECK_SECONDS", "0.3"}, {"HORA_STALL_SHUTDOWN_SECONDS", "1"}},
                 std::chrono::seconds(90));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(count(r.output, "ASYNC_JOB_OK") == 2);
  CHECK(count(r.output, "allreduce 'orphan': missing on rank 1; submitted by rank 0") >= 1);
  CHECK(count(r.output,
              "allreduce 'orphan' was abandoned by the stall check: rank 1 did not submit it") ==
        1);
}

TEST_CASE("horarun: a waiting caller never waits for the engine's tick", "[integration]") {
  // 200 steps with a 60 s cycle time: cycles come only from waits. A wait that triggered a cycle
  // completing nothing (its op finished in the cycle before) used to leave the next step for a
  // whole tick on one rank: about one step in 25, so this run would take minutes. 45 s is more
  // than ten times what it takes under a sanitizer on a loaded 2-core machine.
  const int np = GENERATE(2, 3);
  Result r = run({required_env("HORARUN"), "-np", std::to_string(np), "-H",
                  "localhost:" + std::to_string(np), required_env("ASYNC_JOB"), "steps"},
                 {{"HORA_CYCLE_TIME_MS", "60000"}}, std::chrono::seconds(45));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(count(r.output, "ASYNC_JOB_OK") == np);
}

TEST_CASE("horarun: shutdown fails an op still in flight", "[integration]") {
  Result r = run({required_env("HORARUN"), "-np", "2", "-H", "localhost:2",
                  required_env("ASYNC_JOB"), "inflight"},
                 {}, std::chrono::seconds(90));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(count(r.output, "INFLIGHT_FAILED rank 0: ") == 1);
  CHECK(count(r.output, "hora was shut down before allreduce 'inflight' completed") == 1);
}
