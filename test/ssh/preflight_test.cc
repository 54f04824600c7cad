// probe_hosts (ssh/preflight.h): many hosts at once, each failure reported with its own reason.
// The "hosts" are one real sshd on 127.0.0.1 (test/ssh/local_sshd.h) reached with different
// targets: good, wrong port, unauthorised key.
#include "ssh/preflight.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "ssh/errors.h"
#include "test/ssh/local_sshd.h"
#include "test/ssh/skip_main.h"

HORA_TEST_MAIN_SKIP_UNLESS(hora::ssh::test::LocalSshd::unavailable_reason())

using namespace hora::ssh;
using hora::ssh::test::LocalSshd;
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
  // Structural, not timed: each probe prints the (shared, same-machine) clock before and after
  // its sleep. The probes overlapped iff the latest start comes before the earliest end; run one
  // after another, every start would follow the previous end however slow the logins are.
  LocalSshd sshd;
  std::vector<ProbeRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    reqs.push_back({sshd.target(), "date +%s%N; sleep 1; date +%s%N", ""});
  }
  const auto results = probe_hosts(reqs, {}, Clock::now() + 60s);
  long long latest_start = 0, earliest_end = std::numeric_limits<long long>::max();
  for (const auto& r : results) {
    REQUIRE(r.ok());
    std::istringstream out(r.run->out);
    long long start = 0, end = 0;
    REQUIRE(out >> start >> end);
    CHECK(start < end);
    latest_start = std::max(latest_start, start);
    earliest_end = std::min(earliest_end, end);
  }
  CHECK(latest_start < earliest_end);
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
