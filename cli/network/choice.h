// Choosing one network interface per host (docs/network.md, "How interfaces are chosen").
//
// Pure: the inputs are what the probes reported (cli/network/probe.h), the spec from
// --network-interfaces (cli/network/spec.h) and the reachability the connect probes measured; the
// output is, per host, the interface its ranks bind (HORA_IFACE, GLOO_SOCKET_IFNAME,
// NCCL_SOCKET_IFNAME) and the address peers reach it at. Nothing here touches the network.
//
// With a spec: every host must have each name that applies to it, up and with an address; the
// first name is the chosen one. Without: all hosts local -> loopback; otherwise keep, per host,
// the interfaces every other host reached, prefer a name all hosts share, and fail with the
// reachability table when some host keeps none.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/base/errors.h"
#include "cli/network/probe.h"
#include "cli/network/spec.h"

namespace hora::cli {

// Discovery found no interface set over which all hosts reach each other. horarun exits 1.
class NetworkError : public Error {
  using Error::Error;
};

struct HostInterfaces {
  std::string host;    // as written in -H / the hostfile; the key of per-host spec entries
  bool local = false;  // this machine (ranks started without SSH)
  std::vector<NetworkInterface> interfaces;  // from --probe-interfaces
  // Optional tie-breaker: an address of this host known to work (the one SSH connected to).
  // Among otherwise equal candidates, the interface holding it wins.
  std::string hint_address;
};

// What the connect probes measured: reached[target host][interface name] = the indices (into
// the hosts vector) of the hosts that connected to an address of that interface.
struct Reachability {
  std::vector<std::map<std::string, std::set<std::size_t>>> reached;
};

// Builds a Reachability from the probes: listeners[i] is what host i's --probe-listen reported,
// connects[i] what host i's --probe-connect printed (empty when it could not run). Outcomes for
// targets that belong to no listener are ignored.
Reachability make_reachability(const std::vector<std::vector<ProbeEndpoint>>& listeners,
                               const std::vector<std::vector<ConnectOutcome>>& connects);

// The targets host `source` must try: every endpoint of every other host.
std::vector<ProbeEndpoint> connect_targets_for(
    std::size_t source, const std::vector<std::vector<ProbeEndpoint>>& listeners);

struct HostChoice {
  std::string host;
  std::string iface;    // HORA_IFACE / GLOO_SOCKET_IFNAME for ranks on this host
  std::string address;  // the interface's preferred address: what peers connect to
  // Every name the spec gave this host, chosen one first (NCCL_SOCKET_IFNAME takes the list);
  // just `iface` when discovered.
  std::vector<std::string> names;
  std::vector<std::string> alternatives;  // other routable interfaces (discovery), for --verbose
};

struct NetworkChoice {
  enum class How { kExplicit, kDiscovered, kLoopback };
  How how = How::kDiscovered;
  std::vector<HostChoice> hosts;  // in the order of the input hosts

  const HostChoice& for_host(const std::string& host) const;  // throws std::out_of_range
};

// Throws UsageError when the spec names a host that is not in the job or an interface a host
// lacks (all such hosts in one message, each with the interfaces it does have and the
// per-host flag that would work), NetworkError when discovery finds no routable set (the
// message holds the reachability table). `reach` is needed only for discovery with more than
// one host; pass nullptr otherwise.
NetworkChoice choose_interfaces(const std::vector<HostInterfaces>& hosts, const NetworkSpec& spec,
                                const Reachability* reach);

// Throws UsageError when a per-host entry of the spec names a host that is not in `hosts` (the
// job's host names as in -H): checked before any connection is made.
void check_spec_hosts(const NetworkSpec& spec, const std::vector<std::string>& hosts);

// For an explicit choice across hosts: throws NetworkError, with the measured table and a spec
// that would work, when some host's chosen interface was not reached by every other host.
void check_reachable(const std::vector<HostInterfaces>& hosts, const NetworkChoice& choice,
                     const Reachability& reach);

// One line per host for --verbose and --dry-run:
//   "network: interfaces discovered (reachable from every other host):"
//   "  h1: eth1 198.19.1.11 (also routable: eth0)"
std::string describe_choice(const NetworkChoice& choice);

// The table put in discovery errors (also useful for --verbose): one row per host and candidate
// interface, one column per other host, "yes"/"no".
std::string format_reachability_table(const std::vector<HostInterfaces>& hosts,
                                      const Reachability& reach);

// Names with addresses, for "it has lo, eth0, ens5": every interface of the host, marked
// "(down)" or "(no address)" when that is why it cannot be used.
std::string describe_interfaces(const std::vector<NetworkInterface>& interfaces);

}  // namespace hora::cli
