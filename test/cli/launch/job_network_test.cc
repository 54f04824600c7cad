// apply_job_network(): where the rendezvous server listens, what each host is told, and the
// interface variables per host, from a given choice (cli/launch/job_network.h). The choice itself
// and discovery are tested in test/cli/network and test/remote.
#include <catch2/catch.hpp>

#include "cli/launch/job_network.h"

using namespace hora::cli;

namespace {

HostChoice chosen(const std::string& host, const std::string& iface, const std::string& address,
                  std::vector<std::string> names = {}) {
  HostChoice c;
  c.host = host;
  c.iface = iface;
  c.address = address;
  c.names = names.empty() ? std::vector<std::string>{iface} : std::move(names);
  return c;
}

RemoteHost remote(int index, const std::string& launcher_address, const std::string& address) {
  RemoteHost h;
  h.index = index;
  h.launcher_address = launcher_address;
  h.host_address = address;
  return h;
}

}  // namespace

TEST_CASE("all-local jobs bind the rendezvous and every rank to the one chosen interface") {
  const RankTable table({{"", "localhost", 2}}, 2);
  JobNetwork net;
  net.choice.how = NetworkChoice::How::kLoopback;
  net.choice.hosts = {chosen("localhost", "lo", "127.0.0.1")};
  RemotePlan plan;
  SupervisorConfig config;
  apply_job_network(net, table, plan, config);
  CHECK(config.bind_address == "127.0.0.1");
  CHECK(config.iface == "lo");
  CHECK(config.nccl_ifnames == "lo");
  CHECK(config.master_addr == "127.0.0.1");
  CHECK(config.host_network.empty());
}

TEST_CASE("a mixed job binds the launcher host's chosen address and tells every host that") {
  const RankTable table({{"", "localhost", 1}, {"", "h1", 1}, {"", "h2", 1}}, 3);
  JobNetwork net;
  net.choice.hosts = {chosen("localhost", "br0", "198.18.5.1"), chosen("h1", "eth0", "198.18.5.11"),
                      chosen("h2", "ens5", "198.18.5.12", {"ens5", "ib0"})};
  RemotePlan plan;
  // The SSH connections came from another address of this machine: the choice wins.
  plan.hosts.emplace(1, remote(1, "198.19.5.1", "198.18.5.11"));
  plan.hosts.emplace(2, remote(2, "198.19.5.1", "198.18.5.12"));
  SupervisorConfig config;
  apply_job_network(net, table, plan, config);
  CHECK(config.bind_address == "198.18.5.1");
  REQUIRE(config.host_network.size() == 3);
  for (const HostNetwork& h : config.host_network) CHECK(h.rendezvous_host == "198.18.5.1");
  CHECK(config.host_network[0].iface == "br0");
  CHECK(config.host_network[1].iface == "eth0");
  CHECK(config.host_network[2].iface == "ens5");
  CHECK(config.host_network[2].nccl_ifnames == "ens5,ib0");
  // Rank 0 is local: MASTER_ADDR is its chosen address, and its port is checked there.
  CHECK(config.master_addr == "198.18.5.1");
  CHECK(config.master_port_probe_address.empty());
}

TEST_CASE("an all-remote job binds the address its SSH connections came from") {
  const RankTable table({{"", "h1", 2}, {"", "h2", 2}}, 4);
  JobNetwork net;
  net.choice.hosts = {chosen("h1", "eth1", "198.19.5.11"), chosen("h2", "eth1", "198.19.5.12")};
  RemotePlan plan;
  plan.hosts.emplace(0, remote(0, "198.18.5.1", "198.18.5.11"));
  plan.hosts.emplace(1, remote(1, "198.18.5.1", "198.18.5.12"));
  SupervisorConfig config;
  apply_job_network(net, table, plan, config);
  CHECK(config.bind_address == "198.18.5.1");
  CHECK(config.host_network.at(0).rendezvous_host == "198.18.5.1");
  CHECK(config.host_network.at(1).iface == "eth1");
  // MASTER_ADDR is rank 0's host's chosen (data) address, not the SSH address.
  CHECK(config.master_addr == "198.19.5.11");
  CHECK(config.master_port_probe_address == "0.0.0.0");

  SECTION("hosts that reach this machine at different addresses: bind every address") {
    plan.hosts.at(1).launcher_address = "198.19.200.1";
    apply_job_network(net, table, plan, config);
    CHECK(config.bind_address == "0.0.0.0");
    CHECK(config.host_network.at(0).rendezvous_host == "198.18.5.1");
    CHECK(config.host_network.at(1).rendezvous_host == "198.19.200.1");
  }
}
