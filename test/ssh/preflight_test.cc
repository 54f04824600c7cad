// probe_hosts (ssh/preflight.h): many hosts at once, each failure reported with its own reason.
// The "hosts" are one real sshd on 127.0.0.1 (test/ssh/local_sshd.h) reached with different
// targets: good, wrong port, unauthorised key.
#include "ssh/preflight.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "ssh/errors.h"
#include "test/ssh/local_sshd.h"
#include "test/ssh/skip_main.h"

HORA_TEST_MAIN_SKIP_UNLESS(hora::ssh::test::LocalSshd::unavailable_reason())

using namespace hora::ssh;
using hora::ssh::test::LocalSshd;
using hora::ssh::test::sh;
using namespace std::chrono_literals;

namespace {

// A port on 127.0.0.1 that refuses connections: bound, never listening, held until scope exit.
struct RefusingPort {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = 0;
  RefusingPort() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~RefusingPort() { ::close(fd); }
};

}  // namespace

TEST_CASE("every host is probed; failures carry their own reason; results keep request order",
          "[preflight]") {
  LocalSshd sshd;
  RefusingPort refusing;

  ProbeRequest good{sshd.target(), "echo probe-ok; cat", "from-stdin"};
  good.target.alias = "good";
  ProbeRequest wrong_port{sshd.target(), "true", ""};
  wrong_port.target.alias = "wrongport";
  wrong_port.target.port = refusing.port;
  ProbeRequest bad_key{sshd.target(), "true", ""};
  bad_key.target.alias = "badkey";
  bad_key.target.identity_files = {sshd.stranger_key()};

  PreflightOptions opts;
  opts.keep_sessions = true;
  auto results = probe_hosts({good, wrong_port, bad_key}, opts, Clock::now() + 20s);
  REQUIRE(results.size() == 3);

  CHECK(results[0].ok());
  REQUIRE(results[0].run);
  CHECK(results[0].run->out == "probe-ok\nfrom-stdin");
  CHECK(results[0].run->exit_status == 0);
  CHECK(results[0].local_address == "127.0.0.1");
  REQUIRE(results[0].session);  // kept for reuse
  CHECK(results[0].session->run("echo reused", "", Clock::now() + 10s).out == "reused\n");

  CHECK_FALSE(results[1].ok());
  CHECK_THROWS_AS(std::rethrow_exception(results[1].error), ConnectError);
  CHECK_THAT(results[1].error_message,
             Catch::StartsWith("wrongport: connection refused on 127.0.0.1:" +
                               std::to_string(refusing.port)));
  CHECK_FALSE(results[1].session);

  CHECK_FALSE(results[2].ok());
  CHECK_THROWS_AS(std::rethrow_exception(results[2].error), AuthError);
  CHECK_THAT(results[2].error_message, Catch::Contains(sshd.stranger_key()));

  const std::string summary = describe_failures(results);
  CHECK_THAT(summary, Catch::StartsWith("preflight failed on 2 of 3 hosts:\n  wrongport: "));
  CHECK_THAT(summary, Catch::Contains("\n  authentication failed for root@badkey"));
  results.resize(1);  // only the good host left
  CHECK(describe_failures(results).empty());
}

TEST_CASE("hosts are probed concurrently: every probe runs while the others run", "[preflight]") {
  // Structural, not timed: each probe adds a file to a shared directory, then waits until all
  // four files are there. That happens only if the four run at once; run one after another, the
  // first probe waits alone until its deadline and fails, and each later one finds that deadline
  // passed, so every probe's output names how many had arrived. The deadline (an absolute time,
  // shared by all four) leaves a loaded machine a minute for four logins, and falls inside the
  // preflight's own deadline and the test's timeout (test/ssh/meson.build).
  constexpr int kProbes = 4;
  LocalSshd sshd;
  const std::string dir = sshd.dir() / "rendezvous";
  sh("mkdir " + dir);
  const long long until = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch() + 60s)
                              .count();
  const std::string probe = "d=" + dir + "; mktemp \"$d/probe.XXXXXX\" >/dev/null || exit 2; " +
                            "while set -- \"$d\"/probe.*; [ $# -lt " + std::to_string(kProbes) +
                            " ]; do [ \"$(date +%s)\" -lt " + std::to_string(until) +
                            " ] || { echo \"only $# of " + std::to_string(kProbes) +
                            " probes arrived\"; exit 1; }; sleep 0.05; done; echo \"$# arrived\"";
  std::vector<ProbeRequest> reqs(kProbes, ProbeRequest{sshd.target(), probe, ""});
  const auto results = probe_hosts(reqs, {}, Clock::now() + 90s);
  REQUIRE(results.size() == reqs.size());
  for (const auto& r : results) {
    INFO(r.error_message);
    REQUIRE(r.ok());
    CHECK(r.run->out == std::to_string(kProbes) + " arrived\n");
    CHECK(r.run->exit_status == 0);
  }
}

TEST_CASE("a probe that outlives the deadline fails that host with a timeout", "[preflight]") {
  LocalSshd sshd;
  ProbeRequest slow{sshd.target(), "sleep 600", ""};
  slow.target.alias = "slowhost";
  ProbeRequest quick{sshd.target(), "echo fast", ""};
  const auto t0 = Clock::now();
  // The deadline leaves the quick probe time for a login over SSH on a loaded machine with a slow
  // login shell (~1 s each); the slow one cannot finish within it.
  const auto results = probe_hosts({slow, quick}, {}, Clock::now() + 15s);
  CHECK(Clock::now() - t0 < 300s);  // returned at the deadline, not after the 600 s sleep
  CHECK_FALSE(results[0].ok());
  CHECK_THAT(results[0].error_message,
             Catch::StartsWith("slowhost: `sleep 600` did not finish within"));
  CHECK(results[1].ok());
}
