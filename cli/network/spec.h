// --network-interfaces as a value: which interface names the user asked for, globally and per
// host (docs/network.md, "The spec").
//
//   --network-interfaces eth0,eth1                 every host uses eth0 (and must also have eth1)
//   --network-interfaces server1=eth0,server2=ens5 per host
//   --network-interfaces eth0,server2=ens5         server2 uses ens5, every other host eth0
//
// Options already splits the comma lists and the repeatable --network-interface into items;
// parse_network_spec() turns the items into a NetworkSpec and rejects what cannot be an
// interface name. Whether a host has the interface is checked later, against the host's probe
// (cli/network/choice.h).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hora::cli {

struct NetworkSpec {
  // Unqualified names, in the order given: they apply to every host without its own entry.
  std::vector<std::string> global;
  // host (as written in -H / the hostfile) -> names for that host, in the order given.
  std::map<std::string, std::vector<std::string>> per_host;

  bool empty() const { return global.empty() && per_host.empty(); }
  // The names `host` must have: its own entry if it has one, else the global names (possibly
  // none: the host's interface is then discovered, see cli/network/choice.h).
  const std::vector<std::string>& names_for(const std::string& host) const;
};

// Items as in Options::network_interfaces ("eth0", "server1=eth0"; an item may also still hold
// commas). Throws UsageError naming the bad item and the accepted forms.
NetworkSpec parse_network_spec(const std::vector<std::string>& items);

// Linux interface names: 1..15 bytes (IFNAMSIZ - 1), no '/', ':', '=', ',', whitespace, and
// neither "." nor "..". Returns why `name` is not one, or an empty string when it is valid.
std::string interface_name_problem(const std::string& name);

// The spec back in the --network-interfaces form, for messages ("eth0,server2=ens5").
std::string format_network_spec(const NetworkSpec& spec);

}  // namespace hora::cli
