// Discovery across real hosts: the probe modes run inside the network namespaces of
// scripts/testhosts.sh --second-network --hosts 2 (h1: eth0 + eth1, h2: eth0 + ens5 on the same
// second network, h3: eth0 + an isolated eth1), started with `ip netns exec`, in the launcher's
// order: --probe-interfaces on every host, --probe-listen on every host up to "ready",
// --probe-connect on every host at once, then the listeners' stdin closed. The measured
// reachability and the choice must match the wiring, and the whole probe must take a few
// seconds, far inside the 30 s start timeout.
//
// network_discovery_test.sh brings the hosts up (fresh index, torn down in a trap) and passes
// HORA_TESTHOSTS_DIR and the probe binary; without them this program exits 77.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/network/choice.h"
#include "common/unique_fd.h"

using namespace hora::cli;
using Catch::Matchers::Contains;
using hora::UniqueFd;
using Clock = std::chrono::steady_clock;

namespace {

std::string g_probe;  // the probe binary
std::string g_state;  // testhosts state dir

struct TestHost {
  std::string alias, ns, addr, addr2, iface2;
};

std::vector<TestHost> read_hosts() {
  std::ifstream in(g_state + "/hosts");
  std::vector<TestHost> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    TestHost h;
    w >> h.alias >> h.ns >> h.addr >> h.addr2 >> h.iface2;
    if (!h.alias.empty()) out.push_back(h);
  }
  return out;
}

// One probe process in a namespace: its stdin (kept open for listeners) and stdout as pipes;
// stderr is inherited so failures show in the test log.
struct Child {
  pid_t pid = -1;
  UniqueFd in, out, pidfd;
  std::string text;
  bool eof = false;

  Child(const std::string& ns, const std::vector<std::string>& args) {
    int i[2], o[2];
    REQUIRE(::pipe2(i, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(o, O_CLOEXEC) == 0);
    std::vector<std::string> argv = {"ip", "netns", "exec", ns, g_probe};
    argv.insert(argv.end(), args.begin(), args.end());
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(i[0], 0);
      ::dup2(o[1], 1);
      std::vector<char*> cargv;
      for (std::string& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::execvp("ip", cargv.data());
      ::_exit(127);
    }
    ::close(i[0]);
    ::close(o[1]);
    in = UniqueFd(i[1]);
    out = UniqueFd(o[0]);
    pidfd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    REQUIRE(pidfd);
  }
  ~Child() {
    if (pid > 0) {  // a check failed midway: do not leave the probe behind
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  // Blocks (up to `deadline`) until the process exits; returns its exit code, -1 on timeout.
  int wait(Clock::time_point deadline) {
    pollfd p{pidfd.get(), POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) != 1) return -1;
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

// Reads the children's stdout until `done(child)` holds for all of them or `deadline` passes.
bool read_until(std::vector<Child*> children, const std::function<bool(const Child&)>& done,
                Clock::time_point deadline) {
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Child*> who;
    for (Child* c : children) {
      if (done(*c) || c->eof) continue;
      fds.push_back(pollfd{c->out.get(), POLLIN, 0});
      who.push_back(c);
    }
    if (fds.empty()) {
      return std::all_of(children.begin(), children.end(), [&](Child* c) { return done(*c); });
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left)) < 0 && errno != EINTR) return false;
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      char buf[4096];
      const ssize_t r = ::read(fds[k].fd, buf, sizeof buf);
      if (r <= 0)
        who[k]->eof = true;
      else
        who[k]->text.append(buf, static_cast<std::size_t>(r));
    }
  }
}

struct Probed {
  std::vector<HostInterfaces> hosts;
  Reachability reach;
  std::chrono::milliseconds took{0};
};

// The launcher's probe sequence over `hosts`, as cli/network/probe.h describes it.
Probed probe(const std::vector<TestHost>& hosts) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(60);
  Probed p;
  {
    std::vector<std::unique_ptr<Child>> kids;
    std::vector<Child*> raw;
    for (const TestHost& h : hosts) {
      kids.push_back(std::make_unique<Child>(h.ns, std::vector<std::string>{"--probe-interfaces"}));
      kids.back()->in.reset();
      raw.push_back(kids.back().get());
    }
    REQUIRE(read_until(
        raw, [](const Child& c) { return c.eof; }, deadline));
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      REQUIRE(kids[i]->wait(deadline) == 0);
      p.hosts.push_back(HostInterfaces{hosts[i].alias, false,
                                       parse_interfaces(kids[i]->text, hosts[i].alias),
                                       hosts[i].addr});
    }
  }
  std::vector<std::unique_ptr<Child>> listeners;
  std::vector<Child*> raw;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    listeners.push_back(std::make_unique<Child>(
        hosts[i].ns, std::vector<std::string>{"--probe-listen", "tok-h" + std::to_string(i)}));
    raw.push_back(listeners.back().get());
  }
  REQUIRE(read_until(
      raw, [](const Child& c) { return listen_output_complete(c.text); }, deadline));
  std::vector<std::vector<ProbeEndpoint>> endpoints;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    endpoints.push_back(
        parse_listen_output(listeners[i]->text, "tok-h" + std::to_string(i), hosts[i].alias));
  }
  std::vector<std::unique_ptr<Child>> connectors;
  std::vector<Child*> craw;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    connectors.push_back(std::make_unique<Child>(
        hosts[i].ns,
        std::vector<std::string>{"--probe-connect",
                                 connect_argument(connect_targets_for(i, endpoints))}));
    connectors.back()->in.reset();
    craw.push_back(connectors.back().get());
  }
  REQUIRE(read_until(
      craw, [](const Child& c) { return c.eof; }, deadline));
  std::vector<std::vector<ConnectOutcome>> outcomes;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    REQUIRE(connectors[i]->wait(deadline) == 0);
    outcomes.push_back(parse_connect_output(connectors[i]->text, hosts[i].alias));
  }
  for (auto& l : listeners) {
    l->in.reset();  // EOF on the listener's stdin ends it
    REQUIRE(l->wait(deadline) == 0);
  }
  p.reach = make_reachability(endpoints, outcomes);
  p.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return p;
}

std::set<std::size_t> reached(const Probed& p, std::size_t target, const std::string& iface) {
  auto it = p.reach.reached[target].find(iface);
  return it == p.reach.reached[target].end() ? std::set<std::size_t>{} : it->second;
}

}  // namespace

TEST_CASE("discovery on 3 namespace hosts keeps only the routable interfaces, quickly") {
  const std::vector<TestHost> hosts = read_hosts();
  REQUIRE(hosts.size() == 3);
  REQUIRE(hosts[1].iface2 == "ens5");
  const Probed p = probe(hosts);
  INFO(format_reachability_table(p.hosts, p.reach));
  // eth0 is one bridge: everyone reaches everyone.
  CHECK(reached(p, 0, "eth0") == std::set<std::size_t>{1, 2});
  CHECK(reached(p, 1, "eth0") == std::set<std::size_t>{0, 2});
  CHECK(reached(p, 2, "eth0") == std::set<std::size_t>{0, 1});
  // The second network joins h1's eth1 and h2's ens5; h3's eth1 is isolated.
  CHECK(reached(p, 0, "eth1") == std::set<std::size_t>{1});
  CHECK(reached(p, 1, "ens5") == std::set<std::size_t>{0});
  CHECK(reached(p, 2, "eth1").empty());
  const NetworkChoice c = choose_interfaces(p.hosts, NetworkSpec{}, &p.reach);
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    CHECK(c.hosts[i].iface == "eth0");
    CHECK(c.hosts[i].address == hosts[i].addr);
    CHECK(c.hosts[i].alternatives.empty());  // the second network is not routable from h3
  }
  // Unreachable targets end at the connect deadline (2 s), not after TCP's SYN retries (over
  // 2 min): 40 s tells the two apart with room for a loaded machine. The speed figure is
  // bench/discovery.sh's.
  CHECK(p.took < std::chrono::seconds(40));
  WARN("discovery on 3 hosts took " << p.took.count() << " ms");
}

TEST_CASE(
    "without the isolated host, the second network is routable, and eth0 stays the common choice") {
  std::vector<TestHost> hosts = read_hosts();
  hosts.pop_back();
  const Probed p = probe(hosts);
  INFO(format_reachability_table(p.hosts, p.reach));
  const NetworkChoice c = choose_interfaces(p.hosts, NetworkSpec{}, &p.reach);
  CHECK(c.for_host("h1").iface == "eth0");
  CHECK(c.for_host("h1").alternatives == std::vector<std::string>{"eth1"});
  CHECK(c.for_host("h2").alternatives == std::vector<std::string>{"ens5"});
  // The second network by per-host names, checked against the real interfaces.
  const NetworkChoice e =
      choose_interfaces(p.hosts, parse_network_spec({"eth1", "h2=ens5"}), nullptr);
  CHECK(e.for_host("h1").address == hosts[0].addr2);
  CHECK(e.for_host("h2").iface == "ens5");
  CHECK(e.for_host("h2").address == hosts[1].addr2);
  CHECK_THROWS_WITH(
      choose_interfaces(p.hosts, parse_network_spec({"eth1"}), nullptr),
      "no interface eth1 on h2; it has lo, eth0, ens5; use --network-interfaces eth1,h2=ens5");
}

int main(int argc, char** argv) {
  const char* state = std::getenv("HORA_TESTHOSTS_DIR");
  const char* probe_bin = std::getenv("HORA_NETWORK_PROBE");
  if (state == nullptr || probe_bin == nullptr) {
    std::fprintf(stderr, "skipped: run through network_discovery_test.sh (needs test hosts)\n");
    return 77;
  }
  g_state = state;
  g_probe = probe_bin;
  return Catch::Session().run(argc, argv);
}
