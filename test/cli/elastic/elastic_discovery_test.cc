// cli/elastic/discovery_script.h: the discovery script's output parsed, and real scripts run
// (printing hosts, failing with stderr, hanging past the deadline, printing too much), with no
// process left behind.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "cli/elastic/discovery_script.h"

using namespace hora::cli;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<std::string> names(const std::vector<HostSpec>& hosts) {
  std::vector<std::string> out;
  for (const HostSpec& h : hosts) {
    out.push_back((h.user.empty() ? "" : h.user + "@") + h.address_for_display() + ":" +
                  std::to_string(h.slots));
  }
  return out;
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/elastic_discovery_test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string script(const std::string& name, const std::string& body) const {
    const std::string file = path + "/" + name;
    std::ofstream(file) << "#!/bin/sh\n" << body;
    ::chmod(file.c_str(), 0755);
    return file;
  }
};

// Running (a zombie whose parent is gone is dead: PID 1 of a container may never reap it).
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren == std::string::npos || line.size() < paren + 3 || line[paren + 2] != 'Z';
}

// Reads a pid a script wrote to `file` (waiting for it a little).
pid_t read_pid(const std::string& file) {
  for (int i = 0; i < 200; ++i) {
    std::ifstream in(file);
    long pid = 0;
    if (in >> pid && pid > 0) return static_cast<pid_t>(pid);
    std::this_thread::sleep_for(10ms);
  }
  FAIL("no pid in " << file);
  return -1;
}

bool gone_soon(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    if (!alive(pid)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

TEST_CASE("discovery output: host:slots lines, blank lines and whitespace tolerated") {
  CHECK(names(parse_discovery_output("h1:4\nh2:2\n", std::nullopt)) ==
        std::vector<std::string>{"h1:4", "h2:2"});
  CHECK(names(parse_discovery_output("\n  h1:4  \r\n\n\th2:1\n\n", std::nullopt)) ==
        std::vector<std::string>{"h1:4", "h2:1"});
  CHECK(parse_discovery_output("", std::nullopt).empty());
  CHECK(parse_discovery_output("\n \n", std::nullopt).empty());
  // No newline at the end; user@ and [ipv6] as -H takes them.
  CHECK(names(parse_discovery_output("bob@h1:2\n[fe80::1]:3", std::nullopt)) ==
        std::vector<std::string>{"bob@h1:2", "[fe80::1]:3"});
  // A host with 0 slots is not available.
  CHECK(names(parse_discovery_output("h1:0\nh2:1\n", std::nullopt)) ==
        std::vector<std::string>{"h2:1"});
}

TEST_CASE("discovery output: a bare host takes --slots-per-host, or is an error") {
  CHECK(names(parse_discovery_output("h1\nh2:3\n", 2)) == std::vector<std::string>{"h1:2", "h2:3"});
  CHECK_THROWS_WITH(parse_discovery_output("h0:1\nh1\n", std::nullopt),
                    Contains("line 2: 'h1' has no slots") && Contains("--slots-per-host"));
}

TEST_CASE("discovery output: duplicates merged when they agree, refused when not") {
  CHECK(names(parse_discovery_output("h1:2\nh2:1\nh1:2\n", std::nullopt)) ==
        std::vector<std::string>{"h1:2", "h2:1"});
  CHECK(names(parse_discovery_output("h1:2\nh1\n", 2)) == std::vector<std::string>{"h1:2"});
  CHECK_THROWS_WITH(parse_discovery_output("h1:2\nh2:1\nh1:3\n", std::nullopt),
                    Contains("line 3: host 'h1' is listed again") && Contains("line 1") &&
                        Contains("2 slots"));
}

TEST_CASE("discovery output: every bad line is named") {
  CHECK_THROWS_WITH(parse_discovery_output("h0:1\n\nh1:x\n", std::nullopt),
                    Contains("line 3: 'h1:x' is not host:slots") && Contains("'x'"));
  CHECK_THROWS_WITH(parse_discovery_output("h1:-1", std::nullopt),
                    Contains("line 1: 'h1:-1' is not host:slots"));
  CHECK_THROWS_WITH(parse_discovery_output("h1:99999999999", std::nullopt), Contains("too large"));
  CHECK_THROWS_WITH(parse_discovery_output("h1:70000", std::nullopt), Contains("too large"));
  CHECK_THROWS_WITH(parse_discovery_output(":2", std::nullopt),
                    Contains("line 1") && Contains("host name is empty"));
  CHECK_THROWS_WITH(parse_discovery_output("h1:", std::nullopt), Contains("empty"));
  CHECK_THROWS_WITH(parse_discovery_output("h 1:2", std::nullopt), Contains("character ' '"));
  CHECK_THROWS_WITH(parse_discovery_output("a:b:c", std::nullopt), Contains("in brackets"));
  CHECK_THROWS_WITH(parse_discovery_output("[fe80::1", std::nullopt), Contains("never closes"));
  CHECK_THROWS_AS(parse_discovery_output("h1:2 extra", std::nullopt), DiscoveryError);
  CHECK_THROWS_WITH(parse_discovery_output("h1:2,h2:2", std::nullopt), Contains("no commas"));
}

TEST_CASE("a script that prints hosts") {
  TempDir dir;
  const std::string s = dir.script("hosts.sh", "echo h1:2\necho\necho '  h2'\n");
  const DiscoveryResult r = run_discovery_script(s, 3, Clock::now() + 10s);
  INFO(r.error);
  REQUIRE(r.ok);
  CHECK(names(r.hosts) == std::vector<std::string>{"h1:2", "h2:3"});
  CHECK(r.error.empty());
  // Through /bin/sh -c, as horovodrun: arguments and shell syntax work.
  const DiscoveryResult args =
      run_discovery_script(dir.script("arg.sh", "echo \"$1:$2\"\n") + " h9 5", std::nullopt,
                           Clock::now() + 10s);
  REQUIRE(args.ok);
  CHECK(names(args.hosts) == std::vector<std::string>{"h9:5"});
}

TEST_CASE("a script that fails: its exit code and the end of its stderr") {
  TempDir dir;
  std::string body;
  for (int i = 1; i <= 8; ++i) body += "echo 'problem " + std::to_string(i) + "' >&2\n";
  body += "echo h1:2\nexit 3\n";
  const DiscoveryResult r =
      run_discovery_script(dir.script("fail.sh", body), std::nullopt, Clock::now() + 10s);
  CHECK_FALSE(r.ok);
  CHECK(r.hosts.empty());
  CHECK_THAT(r.error, Contains("fail.sh") && Contains("exited with code 3") &&
                          Contains("problem 4 | problem 5 | problem 6 | problem 7 | problem 8"));
  CHECK_THAT(r.error, !Contains("problem 3"));

  const DiscoveryResult missing =
      run_discovery_script(dir.path + "/no-such-script", std::nullopt, Clock::now() + 10s);
  CHECK_FALSE(missing.ok);
  CHECK_THAT(missing.error, Contains("exited with code 127") && Contains("no-such-script"));

  const DiscoveryResult killed =
      run_discovery_script(dir.script("kill.sh", "kill -9 $$\n") + "; exit", std::nullopt,
                           Clock::now() + 10s);
  CHECK_FALSE(killed.ok);
  // sh -c runs the script as its child, and exits 128 + 9 (horovodrun reports the same).
  CHECK_THAT(killed.error, Contains("exited with code 137"));
  const DiscoveryResult shell_killed =
      run_discovery_script("kill -9 $$", std::nullopt, Clock::now() + 10s);
  CHECK_THAT(shell_killed.error, Contains("killed by signal 9"));

  const DiscoveryResult bad = run_discovery_script(dir.script("bad.sh", "echo h1:2\necho h2:x\n"),
                                                   std::nullopt, Clock::now() + 10s);
  CHECK_FALSE(bad.ok);
  CHECK_THAT(bad.error, Contains("bad.sh") && Contains("line 2: 'h2:x' is not host:slots"));
}

TEST_CASE("a script that hangs is killed at the deadline, with what it started") {
  TempDir dir;
  const std::string pids = dir.path + "/pids";
  // The script starts a child in its process group, writes both pids, then hangs.
  const std::string s =
      dir.script("hang.sh", "sleep 300 &\necho $$ > '" + pids + ".sh'\necho $! > '" + pids +
                                ".child'\necho started >&2\nsleep 300\n");
  const auto begin = Clock::now();
  const DiscoveryResult r = run_discovery_script(s, std::nullopt, begin + 1500ms);
  const auto took = Clock::now() - begin;
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Contains("did not finish in time") && Contains("started"));
  CHECK(took >= 1400ms);
  CHECK(took < 5s);
  const pid_t sh = read_pid(pids + ".sh");
  const pid_t child = read_pid(pids + ".child");
  CHECK_FALSE(alive(sh));  // reaped: not even a zombie
  CHECK(gone_soon(child));
}

TEST_CASE("a script that exits but leaves a process holding its stdout") {
  TempDir dir;
  const std::string pids = dir.path + "/pids";
  const std::string s =
      dir.script("bg.sh", "echo h1:2\nsleep 300 &\necho $! > '" + pids + "'\nexit 0\n");
  const auto begin = Clock::now();
  const DiscoveryResult r = run_discovery_script(s, std::nullopt, begin + 10s);
  INFO(r.error);
  REQUIRE(r.ok);
  CHECK(names(r.hosts) == std::vector<std::string>{"h1:2"});
  CHECK(Clock::now() - begin < 5s);  // not held until the deadline
  CHECK(gone_soon(read_pid(pids)));
}

TEST_CASE("too much output is an error, and the script is stopped") {
  TempDir dir;
  const std::string s = dir.script("flood.sh", "yes h1:2\n");
  const DiscoveryResult r = run_discovery_script(s, std::nullopt, Clock::now() + 20s);
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Contains("printed more than 1048576 bytes"));
}

TEST_CASE("DiscoveryRun: polled without blocking, and its destructor stops the script") {
  TempDir dir;
  const std::string pids = dir.path + "/pids";
  pid_t pid = -1;
  pid_t script = -1;
  {
    DiscoveryRun run(dir.script("slow.sh", "echo $$ > '" + pids + "'\nsleep 300\n"), std::nullopt,
                     Clock::now() + 60s);
    pid = run.pid();
    CHECK(pid > 0);
    CHECK(run.stdout_fd() >= 0);
    const auto begin = Clock::now();
    CHECK_FALSE(run.poll(0ms).has_value());
    CHECK_FALSE(run.poll(100ms).has_value());
    CHECK(Clock::now() - begin < 2s);
    script = read_pid(pids);  // sh's child
    CHECK(alive(pid));
    CHECK(alive(script));
  }
  CHECK_FALSE(alive(pid));
  CHECK(gone_soon(script));

  DiscoveryRun quick(dir.script("quick.sh", "echo h1:1\n"), std::nullopt, Clock::now() + 10s);
  std::optional<DiscoveryResult> result;
  for (int i = 0; i < 500 && !result; ++i) result = quick.poll(20ms);
  REQUIRE(result);
  CHECK(result->ok);
  CHECK(quick.pid() == -1);
  CHECK(quick.poll(0ms)->ok);  // the same result again
}
