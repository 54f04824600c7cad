// hora_ssh against the network-namespace test hosts of scripts/testhosts.sh, reached through
// the ssh_config alias file it writes: ssh_config resolution, sessions, the launcher address seen
// by each host, and parallel preflight over several real hosts. Root and `ip netns` are needed
// (else exit 77). The set of hosts gets a fresh index and is torn down even when a check fails.
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "ssh/config.h"
#include "ssh/errors.h"
#include "ssh/preflight.h"
#include "ssh/session.h"
#include "test/ssh/local_sshd.h"
#include "test/ssh/skip_main.h"

using namespace hora::ssh;
using hora::ssh::test::sh;
using namespace std::chrono_literals;

namespace {

std::string script() {
  const char* s = std::getenv("HORA_TESTHOSTS_SCRIPT");
  return s != nullptr ? s : "scripts/testhosts.sh";
}

std::string unavailable() {
  if (::geteuid() != 0) return "needs root for network namespaces";
  if (::access(script().c_str(), X_OK) != 0)
    return script() + " not found (set HORA_TESTHOSTS_SCRIPT)";
  try {
    const std::string ns = "hora-probe-" + std::to_string(::getpid());
    sh("ip netns add " + ns + " 2>/dev/null && ip netns del " + ns);
  } catch (const std::exception&) {
    return "ip netns unavailable";
  }
  return {};
}

// One set of test hosts for the whole test program; `down` in the destructor.
class TestHosts {
 public:
  explicit TestHosts(const std::string& args) {
    std::istringstream out(sh(script() + " up --index auto " + args + " 2>/dev/null"));
    std::string line;
    while (std::getline(out, line)) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
      if (key == "HORA_TESTHOSTS_INDEX") index = value;
      if (key == "HORA_TESTHOSTS_DIR") dir = value;
      if (key == "HORA_TESTHOSTS_SSH_CONFIG") ssh_config = value;
    }
    if (index.empty()) throw std::runtime_error("testhosts.sh up printed no index");
  }
  ~TestHosts() {
    try {
      sh(script() + " down --index " + index + " >/dev/null 2>&1");
    } catch (const std::exception&) {
      // Nothing more to do from a destructor; `testhosts.sh down --index N` cleans up by hand.
    }
  }
  std::string net(int which = 0) const { return (which == 0 ? "198.18." : "198.19.") + index; }
  ConfigSource config() const {
    ConfigSource c;
    c.file = ssh_config;
    return c;
  }

  std::string index, dir, ssh_config;
};

TestHosts& hosts() {
  // 3 regular hosts + the isolated extra host h4 of --second-network.
  static TestHosts h("--hosts 3 --second-network");
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  if (const std::string why = unavailable(); !why.empty()) {
    std::fprintf(stderr, "skipped: %s\n", why.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

TEST_CASE("aliases from the testhosts ssh_config resolve to the namespace hosts", "[testhosts]") {
  const TestHosts& th = hosts();
  const Target t = resolve("h2", {}, th.config());
  CHECK(t.hostname == th.net() + ".12");
  CHECK(t.port == 12345);
  CHECK(t.user == "root");
  CHECK(t.identity_files == std::vector<std::string>{th.dir + "/id_ed25519"});
  CHECK(t.known_hosts_files == std::vector<std::string>{th.dir + "/known_hosts"});
  CHECK(t.host_key_policy == HostKeyPolicy::kAcceptNew);
}

TEST_CASE("a session to a namespace host: exec, and the launcher address that host sees",
          "[testhosts]") {
  const TestHosts& th = hosts();
  auto s = Session::connect(resolve("root@h1", {}, th.config()), {}, Clock::now() + 20s);
  CHECK(s->local_address() == th.net() + ".1");
  CHECK(s->remote_endpoint() == th.net() + ".11:12345");
  const RunResult r =
      s->run("ip -o -4 addr show dev eth0 | awk '{print $4}'; echo oops >&2; exit 4", "",
             Clock::now() + 20s);
  CHECK(r.out == th.net() + ".11/24\n");
  // Root's login shell may print to stderr before the command (see session_test.cc).
  CHECK(r.err.size() >= 5);
  CHECK(r.err.compare(r.err.size() - 5, 5, "oops\n") == 0);
  CHECK(r.exit_status == 4);
}

TEST_CASE("a wrong -p on a namespace host names host and port", "[testhosts]") {
  const TestHosts& th = hosts();
  Overrides o;
  o.port = 22;  // sshd listens on 12345 only
  REQUIRE_THROWS_WITH(Session::connect(resolve("h3", o, th.config()), {}, Clock::now() + 20s),
                      Catch::StartsWith("h3: connection refused on " + th.net() + ".13:22") &&
                          Catch::Contains("-p/--ssh-port"));
}

TEST_CASE("parallel preflight over every test host reports each host's interfaces", "[testhosts]") {
  const TestHosts& th = hosts();
  std::vector<ProbeRequest> reqs;
  for (const char* h : {"h1", "h2", "h3", "h4"}) {
    reqs.push_back({resolve(h, {}, th.config()), "ip -o -4 addr show | awk '{print $2, $4}'", ""});
  }
  PreflightOptions opts;
  opts.keep_sessions = true;
  const auto results = probe_hosts(reqs, opts, Clock::now() + 30s);
  REQUIRE(results.size() == 4);
  for (const auto& r : results) {
    INFO(r.error_message);
    REQUIRE(r.ok());
    CHECK(r.local_address == th.net() + ".1");
    CHECK(r.session);
  }
  // Second network: h1, h2 eth1; h3 (the last regular host) ens5; h4 eth1 on its own segment.
  CHECK_THAT(results[0].run->out, Catch::Contains("eth0 " + th.net() + ".11/24") &&
                                      Catch::Contains("eth1 " + th.net(1) + ".11/24"));
  CHECK_THAT(results[1].run->out, Catch::Contains("eth1 " + th.net(1) + ".12/24"));
  CHECK_THAT(results[2].run->out, Catch::Contains("ens5 " + th.net(1) + ".13/24"));
  CHECK_THAT(results[3].run->out, Catch::Contains("eth1 " + th.net(1) + ".14/24"));

  // Reachability over the second network, probed from the hosts themselves through the kept
  // sessions: sshd listens on eth0 only, so a reachable peer refuses at once and the isolated
  // host does not answer.
  auto probe = [&](std::size_t from, const std::string& to) {
    return results[from]
        .session
        ->run("timeout 2 bash -c 'exec 3<>/dev/tcp/" + to +
                  "/12345' 2>&1 | grep -q refused && echo reachable || echo unreachable",
              "", Clock::now() + 20s)
        .out;
  };
  CHECK(probe(0, th.net(1) + ".13") == "reachable\n");    // h1 -> h3's ens5
  CHECK(probe(2, th.net(1) + ".11") == "reachable\n");    // h3 -> h1's eth1
  CHECK(probe(3, th.net(1) + ".11") == "unreachable\n");  // isolated h4 -> h1
  CHECK(probe(0, th.net(1) + ".14") == "unreachable\n");  // h1 -> isolated h4
}
