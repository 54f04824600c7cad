#include "cli/launch/job_network.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/launch/discovery.h"
#include "cli/network/probe.h"
#include "cli/output/log.h"

namespace hora::cli {
namespace {

constexpr std::chrono::seconds kDiscoveryBudget{10};

std::string ifnames(const HostChoice& c) {
  return c.names.empty() ? c.iface : fmt::format("{}", fmt::join(c.names, ","));
}

// The addresses the remote hosts may connect from: every address of every interface they
// reported, and the one SSH reached. Empty (no filter) when one of them reported none.
std::vector<std::string> remote_host_addresses(const JobNetwork& network, const RemotePlan& plan) {
  std::vector<std::string> out;
  for (const auto& [index, host] : plan.hosts) {
    const auto i = static_cast<std::size_t>(index);
    if (i >= network.probed.size() || network.probed[i].interfaces.empty()) return {};
    for (const NetworkInterface& nic : network.probed[i].interfaces) {
      for (const InterfaceAddress& a : nic.addresses) out.push_back(a.address);
    }
    if (!host.host_address.empty()) out.push_back(host.host_address);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

JobNetwork choose_job_network(const RankTable& table, RemotePlan& plan, const NetworkSpec& spec,
                              std::chrono::seconds start_timeout) {
  JobNetwork net;
  const std::size_t n = table.hosts().size();
  bool all_local = true;
  for (std::size_t i = 0; i < n; ++i) {
    HostInterfaces hi;
    hi.host = table.hosts()[i].name;
    const auto it = plan.hosts.find(static_cast<int>(i));
    hi.local = it == plan.hosts.end();
    if (hi.local) {
      hi.interfaces = local_interfaces();
    } else {
      all_local = false;
      hi.interfaces = parse_interfaces(it->second.probe_output, it->second.describe());
      hi.hint_address = it->second.host_address;
    }
    net.probed.push_back(std::move(hi));
  }
  const bool probe = !all_local && n >= 2;
  auto discover = [&] {
    // One deadline for the whole discovery, inside the start timeout.
    const auto started = ssh::Clock::now();
    const auto budget = std::min<std::chrono::seconds>(kDiscoveryBudget, start_timeout);
    std::vector<DiscoveryTarget> targets;
    for (std::size_t i = 0; i < n; ++i) {
      const auto it = plan.hosts.find(static_cast<int>(i));
      DiscoveryTarget t{net.probed[i].host};
      if (it != plan.hosts.end()) {
        t.agent = it->second.agent.get();
      }
      targets.push_back(std::move(t));
    }
    net.reach = discover_reachability(targets, started + budget);
    net.discovery_time =
        std::chrono::duration_cast<std::chrono::milliseconds>(ssh::Clock::now() - started);
    launcher_log()->info("network discovery on {} hosts took {} ms", n, net.discovery_time.count());
  };
  if (spec.empty()) {
    if (probe) discover();
    net.choice = choose_interfaces(net.probed, spec, net.reach ? &*net.reach : nullptr);
    return net;
  }
  // Named interfaces: checked against every host's list first (a usage error names what each
  // host has), then measured like discovery, so an interface the other hosts cannot reach fails
  // here with the table instead of as a start timeout. When the probes themselves cannot run,
  // the user's word stands.
  net.choice = choose_interfaces(net.probed, spec, nullptr);
  if (probe) {
    try {
      discover();
    } catch (const NetworkError& e) {
      launcher_log()->warn(
          "could not check that the named interfaces reach each other ({}); "
          "going on with them",
          e.what());
      return net;
    }
    check_reachable(net.probed, net.choice, *net.reach);
  }
  return net;
}

void apply_job_network(const JobNetwork& network, const RankTable& table, const RemotePlan& plan,
                       SupervisorConfig& config) {
  const auto& hosts = network.choice.hosts;
  const std::size_t n = table.hosts().size();
  // The first host that runs on this machine, if any.
  std::optional<std::size_t> local;
  for (std::size_t i = 0; i < n && !local; ++i) {
    if (plan.hosts.count(static_cast<int>(i)) == 0) local = i;
  }
  const int host0 = table.rank(0).host_index;
  const HostChoice& rank0_host = hosts.at(static_cast<std::size_t>(host0));
  config.master_addr = rank0_host.address;
  config.master_port_probe_address = plan.hosts.count(host0) != 0 ? "0.0.0.0" : "";

  if (!plan.any()) {
    // Every host is this machine: one interface for all ranks (lo, or the one named).
    config.bind_address = hosts.at(0).address;
    config.iface = hosts.at(0).iface;
    config.nccl_ifnames = ifnames(hosts.at(0));
    config.host_network.clear();
    return;
  }
  if (local) {
    config.bind_address = hosts.at(*local).address;
  } else {
    // Nobody measured which address of this machine the hosts reach; the SSH connections show
    // one per host. Bind it when they agree, else every address.
    const std::string first = plan.hosts.begin()->second.launcher_address;
    const bool same = std::all_of(plan.hosts.begin(), plan.hosts.end(), [&](const auto& h) {
      return h.second.launcher_address == first;
    });
    config.bind_address = same ? first : (first.find(':') != std::string::npos ? "::" : "0.0.0.0");
  }
  config.host_network.clear();
  config.remote_host_addresses = remote_host_addresses(network, plan);
  for (std::size_t i = 0; i < n; ++i) {
    const auto it = plan.hosts.find(static_cast<int>(i));
    HostNetwork hn;
    hn.rendezvous_host =
        local || it == plan.hosts.end() ? config.bind_address : it->second.launcher_address;
    hn.iface = hosts.at(i).iface;
    hn.nccl_ifnames = ifnames(hosts.at(i));
    config.host_network.push_back(std::move(hn));
  }
}

}  // namespace hora::cli
