// The interface choice as tables: hosts' interfaces and a measured reachability in, one
// interface per host (or the error a user would read) out.
#include <catch2/catch.hpp>

#include "cli/network/choice.h"

using namespace hora::cli;
using Catch::Matchers::Contains;

namespace {

NetworkInterface up(const std::string& name, const std::string& addr, bool loopback = false) {
  NetworkInterface i;
  i.name = name;
  i.up = true;
  i.loopback = loopback;
  if (!addr.empty())
    i.addresses.push_back(InterfaceAddress{addr, addr.find(':') != std::string::npos ? 64 : 24,
                                           addr.find(':') != std::string::npos});
  return i;
}

NetworkInterface down(const std::string& name, const std::string& addr) {
  NetworkInterface i = up(name, addr);
  i.up = false;
  return i;
}

NetworkInterface lo() { return up("lo", "127.0.0.1", true); }

HostInterfaces host(const std::string& name, std::vector<NetworkInterface> ifs,
                    bool local = false) {
  return HostInterfaces{name, local, std::move(ifs), ""};
}

// Reachability where every host reached every listed (host, iface) from all other hosts, except
// the pairs in `blocked` ({target, iface, source}).
struct Block {
  std::size_t target;
  std::string iface;
  std::size_t source;
};
Reachability full(const std::vector<HostInterfaces>& hosts,
                  const std::vector<Block>& blocked = {}) {
  Reachability r;
  r.reached.resize(hosts.size());
  for (std::size_t t = 0; t < hosts.size(); ++t) {
    for (const NetworkInterface& i : hosts[t].interfaces) {
      if (i.loopback || !i.up) continue;
      for (std::size_t s = 0; s < hosts.size(); ++s) {
        if (s == t) continue;
        bool b = false;
        for (const Block& x : blocked)
          b = b || (x.target == t && x.iface == i.name && x.source == s);
        if (!b) r.reached[t][i.name].insert(s);
      }
    }
  }
  return r;
}

// The three namespace hosts of scripts/testhosts.sh --second-network --hosts 2: h1 (eth0, eth1),
// h2 (eth0, ens5 on the same second network) and h3 (eth0, eth1 isolated).
std::vector<HostInterfaces> testhosts() {
  return {
      host("h1", {lo(), up("eth0", "198.18.1.11"), up("eth1", "198.19.1.11")}),
      host("h2", {lo(), up("eth0", "198.18.1.12"), up("ens5", "198.19.1.12")}),
      host("h3", {lo(), up("eth0", "198.18.1.13"), up("eth1", "198.19.1.13")}),
  };
}

}  // namespace

TEST_CASE("explicit name present on every host is honoured") {
  const auto hosts = testhosts();
  const NetworkChoice c = choose_interfaces(hosts, parse_network_spec({"eth0"}), nullptr);
  REQUIRE(c.hosts.size() == 3);
  CHECK(c.how == NetworkChoice::How::kExplicit);
  CHECK(c.for_host("h2").iface == "eth0");
  CHECK(c.for_host("h2").address == "198.18.1.12");
  CHECK(c.for_host("h3").address == "198.18.1.13");
}

TEST_CASE("explicit name missing on a host: the error names the host, its interfaces and a fix") {
  const auto hosts = testhosts();
  CHECK_THROWS_AS(choose_interfaces(hosts, parse_network_spec({"eth1"}), nullptr), UsageError);
  CHECK_THROWS_WITH(
      choose_interfaces(hosts, parse_network_spec({"eth1"}), nullptr),
      "no interface eth1 on h2; it has lo, eth0, ens5; use --network-interfaces eth1,h2=ens5");
}

TEST_CASE("explicit name down or without address on a host is refused") {
  std::vector<HostInterfaces> hosts = {host("h1", {lo(), up("eth0", "10.0.0.1")}),
                                       host("h2", {lo(), down("eth0", "10.0.0.2")}),
                                       host("h3", {lo(), up("eth0", ""), up("eth9", "10.0.9.3")})};
  CHECK_THROWS_WITH(
      choose_interfaces(hosts, parse_network_spec({"eth0"}), nullptr),
      Contains("does not fit 2 of the hosts") && Contains("interface eth0 on h2 is down") &&
          Contains("it has lo, eth0 (down)") &&
          Contains("interface eth0 on h3 has no address; it has lo, eth0 (no address), eth9; "
                   "use --network-interfaces eth0,h3=eth9"));
}

TEST_CASE("several hosts missing the name: one closing line holds every fix at once") {
  std::vector<HostInterfaces> hosts = {
      host("h1", {lo(), up("eth0", "10.0.0.1"), up("eth1", "10.1.0.1")}),
      host("h2", {lo(), up("eth0", "10.0.0.2"), up("ens5", "10.1.0.2")}),
      host("h3", {lo(), up("eth0", "10.0.0.3"), up("ib0", "10.1.0.3")})};
  CHECK_THROWS_WITH(choose_interfaces(hosts, parse_network_spec({"eth1"}), nullptr),
                    Contains("does not fit 2 of the hosts") &&
                        Contains("use --network-interfaces eth1,h2=ens5\n") &&
                        Contains("\nall together: --network-interfaces eth1,h2=ens5,h3=ib0"));
}

TEST_CASE("per-host names work, unqualified names cover the rest") {
  const auto hosts = testhosts();
  const NetworkChoice c =
      choose_interfaces(hosts, parse_network_spec({"eth1", "h2=ens5"}), nullptr);
  CHECK(c.for_host("h1").iface == "eth1");
  CHECK(c.for_host("h2").iface == "ens5");
  CHECK(c.for_host("h2").address == "198.19.1.12");
  CHECK(c.for_host("h3").iface == "eth1");
}

TEST_CASE("several explicit names: all checked, the first chosen, all kept for NCCL") {
  const auto hosts = testhosts();
  const NetworkChoice c =
      choose_interfaces(hosts, parse_network_spec({"h1=eth1,h1=eth0", "eth0"}), nullptr);
  CHECK(c.for_host("h1").iface == "eth1");
  CHECK(c.for_host("h1").names == std::vector<std::string>{"eth1", "eth0"});
  CHECK_THROWS_WITH(choose_interfaces(hosts, parse_network_spec({"h2=eth0,h2=eth1", "eth0"}),
                                      nullptr),
                    Contains("no interface eth1 on h2"));
}

TEST_CASE("a per-host entry for a host not in the job is a usage error") {
  CHECK_THROWS_WITH(choose_interfaces(testhosts(), parse_network_spec({"h9=eth0"}), nullptr),
                    Contains("h9 is not a host of this job (hosts: h1, h2, h3)"));
}

TEST_CASE("only per-host entries, one host without: told to add one") {
  CHECK_THROWS_WITH(choose_interfaces(testhosts(), parse_network_spec({"h1=eth0", "h2=eth0"}),
                                      nullptr),
                    Contains("no interface given for h3") && Contains("h3=NAME"));
}

TEST_CASE("discovery keeps only the interfaces every other host reached") {
  const auto hosts = testhosts();
  // h3's eth1 is isolated: nobody reached it, and h3 reached no one's second interface.
  const Reachability r =
      full(hosts, {{2, "eth1", 0}, {2, "eth1", 1}, {0, "eth1", 2}, {1, "ens5", 2}});
  const NetworkChoice c = choose_interfaces(hosts, NetworkSpec{}, &r);
  CHECK(c.how == NetworkChoice::How::kDiscovered);
  for (const HostChoice& h : c.hosts) CHECK(h.iface == "eth0");
  CHECK(c.for_host("h3").alternatives.empty());
  CHECK(c.for_host("h1").alternatives.empty());  // eth1 of h1 was not reached by h3
  CHECK_THAT(describe_choice(c), Contains("h3: eth0 198.18.1.13"));
}

TEST_CASE("discovery prefers a name common to all hosts") {
  std::vector<HostInterfaces> hosts = {
      host("a",
           {lo(), up("docker0", "172.17.0.1"), up("data0", "10.1.0.1"), up("mgmt", "10.2.0.1")}),
      host("b", {lo(), up("mgmt", "10.2.0.2"), up("data0", "10.1.0.2")}),
  };
  // docker0 on "a" answered too (say, a bridge the other host routes to): still not common.
  const NetworkChoice c =
      choose_interfaces(hosts, NetworkSpec{}, &(const Reachability&)full(hosts));
  CHECK(c.for_host("a").iface == "data0");
  CHECK(c.for_host("b").iface == "data0");
  CHECK(c.for_host("a").alternatives == std::vector<std::string>{"mgmt", "docker0"});
}

TEST_CASE("discovery without a common name picks per host, and the hint breaks ties") {
  std::vector<HostInterfaces> hosts = {
      host("a", {lo(), up("eth0", "10.1.0.1"), up("eth1", "10.2.0.1")}),
      host("b", {lo(), up("ens5", "10.1.0.2"), up("ens6", "10.2.0.2")}),
  };
  hosts[1].hint_address = "10.2.0.2";
  const Reachability r = full(hosts);
  const NetworkChoice c = choose_interfaces(hosts, NetworkSpec{}, &r);
  CHECK(c.for_host("a").iface == "eth0");
  CHECK(c.for_host("b").iface == "ens6");
}

TEST_CASE("no routable set: the error shows the reachability table") {
  std::vector<HostInterfaces> hosts = {
      host("a", {lo(), up("eth0", "10.1.0.1")}),
      host("b", {lo(), up("eth0", "10.1.0.2"), up("eth1", "10.2.0.2")}),
  };
  const Reachability r = full(hosts, {{1, "eth0", 0}, {1, "eth1", 0}});
  try {
    choose_interfaces(hosts, NetworkSpec{}, &r);
    FAIL("expected a NetworkError");
  } catch (const NetworkError& e) {
    const std::string m = e.what();
    CHECK_THAT(m,
               Contains("no network interface of b is reachable over TCP from every other host"));
    CHECK_THAT(m, Contains("host  interface  address   from a  from b"));
    CHECK_THAT(m, Contains("a     eth0       10.1.0.1  -       yes"));
    CHECK_THAT(m, Contains("b     eth0       10.1.0.2  no      -"));
    CHECK_THAT(m, Contains("b     eth1       10.2.0.2  no      -"));
    CHECK_THAT(m, Contains("--network-interfaces"));
  }
}

TEST_CASE("all hosts local: loopback, without any probe") {
  std::vector<HostInterfaces> hosts = {host("localhost", {up("eth0", "10.0.0.5"), lo()}, true)};
  const NetworkChoice c = choose_interfaces(hosts, NetworkSpec{}, nullptr);
  CHECK(c.how == NetworkChoice::How::kLoopback);
  CHECK(c.for_host("localhost").iface == "lo");
  CHECK(c.for_host("localhost").address == "127.0.0.1");
}

TEST_CASE("a local host among remote ones does not get loopback") {
  std::vector<HostInterfaces> hosts = {host("localhost", {lo(), up("eth0", "10.0.0.5")}, true),
                                       host("r1", {lo(), up("eth0", "10.0.0.6")})};
  const Reachability r = full(hosts);
  const NetworkChoice c = choose_interfaces(hosts, NetworkSpec{}, &r);
  CHECK(c.for_host("localhost").iface == "eth0");
  CHECK(c.for_host("r1").iface == "eth0");
}

TEST_CASE("make_reachability maps connect outcomes back to hosts and interfaces") {
  const std::vector<std::vector<ProbeEndpoint>> listeners = {
      {{"t0", "eth0", "10.0.0.1", 4000}},
      {{"t1", "eth0", "10.0.0.2", 4001}, {"t1", "eth1", "10.1.0.2", 4002}},
  };
  CHECK(connect_argument(connect_targets_for(0, listeners)) == "t1@10.0.0.2:4001,t1@10.1.0.2:4002");
  CHECK(connect_targets_for(1, listeners).size() == 1);
  const std::vector<std::vector<ConnectOutcome>> connects = {
      {{"t1@10.0.0.2:4001", true, "1ms"},
       {"t1@10.1.0.2:4002", false, "connect: no answer within 2000ms"}},
      {{"t0@10.0.0.1:4000", true, "1ms"}, {"t9@10.9.9.9:1", true, "not a listener: ignored"}},
  };
  const Reachability r = make_reachability(listeners, connects);
  CHECK(r.reached[1].at("eth0") == std::set<std::size_t>{0});
  CHECK(r.reached[1].count("eth1") == 0);
  CHECK(r.reached[0].at("eth0") == std::set<std::size_t>{1});
}

TEST_CASE("a named interface some host cannot reach fails with the table and a spec that works") {
  const auto hosts = testhosts();
  // h3's eth1 is isolated: h1 and h2 never reached it, and it reached nobody's second NIC.
  const Reachability reach =
      full(hosts, {{2, "eth1", 0}, {2, "eth1", 1}, {0, "eth1", 2}, {1, "ens5", 2}});
  const NetworkChoice named =
      choose_interfaces(hosts, parse_network_spec({"eth1", "h2=ens5"}), nullptr);
  CHECK_THROWS_WITH(check_reachable(hosts, named, reach),
                    Contains("eth1 on h3 (198.19.1.13) is not reachable over TCP from h1, h2") &&
                        Contains("from h1") && Contains("e.g. --network-interfaces eth0)"));
  CHECK_THROWS_AS(check_reachable(hosts, named, reach), NetworkError);
  // The common network passes.
  const NetworkChoice eth0 = choose_interfaces(hosts, parse_network_spec({"eth0"}), nullptr);
  CHECK_NOTHROW(check_reachable(hosts, eth0, reach));
}

TEST_CASE("loopback cannot be named for a job that spans hosts; it can when all are local") {
  const auto hosts = testhosts();
  CHECK_THROWS_WITH(choose_interfaces(hosts, parse_network_spec({"lo"}), nullptr),
                    Contains("lo on h1 is a loopback interface") &&
                        Contains("all together: --network-interfaces eth0"));
  const std::vector<HostInterfaces> local = {
      host("localhost", {lo(), up("eth0", "10.0.0.1")}, true)};
  CHECK(choose_interfaces(local, parse_network_spec({"lo"}), nullptr).hosts.at(0).iface == "lo");
}

TEST_CASE("a typo of the common name: one global suggestion") {
  const auto hosts = testhosts();
  CHECK_THROWS_WITH(choose_interfaces(hosts, parse_network_spec({"eht0"}), nullptr),
                    Contains("no interface eht0 on h1") &&
                        Contains("all together: --network-interfaces eth0"));
}

TEST_CASE("a per-host entry for a host not in the job is a usage error naming the hosts") {
  CHECK_THROWS_AS(check_spec_hosts(parse_network_spec({"h9=eth0"}), {"h1", "h2"}), UsageError);
  CHECK_THROWS_WITH(check_spec_hosts(parse_network_spec({"h9=eth0"}), {"h1", "h2"}),
                    Contains("h9 is not a host of this job (hosts: h1, h2)"));
  CHECK_NOTHROW(check_spec_hosts(parse_network_spec({"eth0", "h2=ens5"}), {"h1", "h2"}));
}
