#include "cli/network/choice.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace hora::cli {
namespace {

// Names of interfaces that usually connect a host to its own containers or VPNs rather than to
// other hosts. Only a tie-breaker: reachability decides first.
bool looks_virtual(const std::string& name) {
  static const char* const kPrefixes[] = {"docker", "virbr",     "veth", "br-", "cni", "flannel",
                                          "cali",   "vxlan",     "tun",  "tap", "lxc", "lxd",
                                          "kube",   "tailscale", "wg",   "zt"};
  for (const char* p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

bool has_address(const NetworkInterface& i, const std::string& address) {
  return std::any_of(i.addresses.begin(), i.addresses.end(),
                     [&](const InterfaceAddress& a) { return a.address == address; });
}

// Usable as a discovery candidate and as a probe target: up, not loopback, an address peers can
// connect to without a scope.
bool candidate(const NetworkInterface& i) {
  return i.up && !i.loopback && !i.preferred_address().empty();
}

const NetworkInterface* find(const HostInterfaces& h, const std::string& name) {
  for (const NetworkInterface& i : h.interfaces) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

// Lower is better: holds the address SSH reached the host at, does not look virtual, comes
// first in the kernel's list.
std::tuple<int, int, std::size_t> rank_on_host(const HostInterfaces& h, const std::string& name) {
  for (std::size_t k = 0; k < h.interfaces.size(); ++k) {
    const NetworkInterface& i = h.interfaces[k];
    if (i.name != name) continue;
    const bool hint = !h.hint_address.empty() && has_address(i, h.hint_address);
    return {hint ? 0 : 1, looks_virtual(name) ? 1 : 0, k};
  }
  return {2, 2, h.interfaces.size()};
}

std::vector<std::string> sorted_by_rank(const HostInterfaces& h, std::vector<std::string> names) {
  std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return rank_on_host(h, a) < rank_on_host(h, b);
  });
  return names;
}

// True when `a` and `b` are in the same network of `prefix` bits (same family, numeric text).
bool same_network(const std::string& a, const std::string& b, int prefix, bool ipv6) {
  unsigned char x[16] = {};
  unsigned char y[16] = {};
  const int family = ipv6 ? AF_INET6 : AF_INET;
  if (::inet_pton(family, a.c_str(), x) != 1 || ::inet_pton(family, b.c_str(), y) != 1)
    return false;
  for (int bit = 0; bit < prefix; ++bit) {
    const int mask = 0x80 >> (bit % 8);
    if ((x[bit / 8] & mask) != (y[bit / 8] & mask)) return false;
  }
  return true;
}

// The interface of `h` to suggest instead of a missing `name`: one on the same network as
// `name` is on the other hosts (the data NIC under another name), else the best usable one.
std::string suggest_instead(const std::vector<HostInterfaces>& hosts, const HostInterfaces& h,
                            const std::string& name) {
  std::vector<std::string> usable;
  for (const NetworkInterface& c : h.interfaces) {
    if (candidate(c) || (c.up && c.loopback && h.local)) usable.push_back(c.name);
  }
  usable = sorted_by_rank(h, usable);
  for (const std::string& u : usable) {
    for (const InterfaceAddress& mine : find(h, u)->addresses) {
      for (const HostInterfaces& other : hosts) {
        const NetworkInterface* theirs = &other == &h ? nullptr : find(other, name);
        if (theirs == nullptr) continue;
        for (const InterfaceAddress& a : theirs->addresses) {
          if (a.ipv6 == mine.ipv6 && !a.link_local() && a.prefix > 0 &&
              same_network(a.address, mine.address, a.prefix, a.ipv6)) {
            return u;
          }
        }
      }
    }
  }
  return usable.empty() ? std::string() : usable.front();
}

NetworkChoice choose_explicit(const std::vector<HostInterfaces>& hosts, const NetworkSpec& spec) {
  std::vector<std::string> names;
  for (const HostInterfaces& h : hosts) names.push_back(h.host);
  check_spec_hosts(spec, names);
  const bool all_local =
      std::all_of(hosts.begin(), hosts.end(), [](const HostInterfaces& h) { return h.local; });
  NetworkChoice choice;
  choice.how = NetworkChoice::How::kExplicit;
  std::vector<std::string> problems;
  NetworkSpec all_fixed = spec;  // every suggestion at once, for the closing line
  std::size_t fixes = 0;
  for (const HostInterfaces& h : hosts) {
    const std::vector<std::string>& names = spec.names_for(h.host);
    HostChoice hc;
    hc.host = h.host;
    hc.names = names;
    if (names.empty()) {
      // Only per-host entries were given and none for this host.
      problems.push_back(
          fmt::format("no interface given for {} (the others have per-host "
                      "entries); add {}=NAME, or an unqualified name for every "
                      "host without an entry",
                      h.host, h.host));
      choice.hosts.push_back(std::move(hc));
      continue;
    }
    for (const std::string& name : names) {
      const NetworkInterface* i = find(h, name);
      std::string why;
      if (i == nullptr)
        why = fmt::format("no interface {} on {}", name, h.host);
      else if (!i->up)
        why = fmt::format("interface {} on {} is down", name, h.host);
      else if (i->addresses.empty())
        why = fmt::format("interface {} on {} has no address", name, h.host);
      else if (i->preferred_address().empty()) {
        why = fmt::format("interface {} on {} has only link-local IPv6 addresses", name, h.host);
      } else if (i->loopback && !all_local) {
        why =
            fmt::format("{} on {} is a loopback interface, which ranks on other hosts cannot reach",
                        name, h.host);
      }
      if (why.empty()) {
        if (hc.iface.empty()) {
          hc.iface = i->name;
          hc.address = i->preferred_address();
        }
        continue;
      }
      // Suggest a usable interface of this host, in a spec that keeps everything else.
      const std::string instead = suggest_instead(hosts, h, name);
      std::string fix;
      if (!instead.empty()) {
        NetworkSpec fixed = spec;
        fixed.per_host[h.host] = {instead};
        fix = fmt::format("; use --network-interfaces {}", format_network_spec(fixed));
        all_fixed.per_host[h.host] = {instead};
        ++fixes;
      }
      problems.push_back(
          fmt::format("{}; it has {}{}", why, describe_interfaces(h.interfaces), fix));
    }
    choice.hosts.push_back(std::move(hc));
  }
  if (problems.size() == 1) throw UsageError(problems.front());
  if (!problems.empty()) {
    std::string msg =
        fmt::format("--network-interfaces does not fit {} of the hosts:", problems.size());
    for (const std::string& p : problems) msg += "\n  " + p;
    if (fixes > 1 && fixes == problems.size()) {
      // Every host failed on the same name and every fix is the same interface (a typo of a
      // common name): one global name says it best.
      std::set<std::string> fixed_names;
      for (const auto& [host, names] : all_fixed.per_host) {
        if (spec.per_host.count(host) == 0) fixed_names.insert(names.front());
      }
      if (fixes == hosts.size() && spec.per_host.empty() && fixed_names.size() == 1) {
        msg += fmt::format("\nall together: --network-interfaces {}", *fixed_names.begin());
      } else {
        msg +=
            fmt::format("\nall together: --network-interfaces {}", format_network_spec(all_fixed));
      }
    }
    throw UsageError(msg);
  }
  return choice;
}

NetworkChoice choose_loopback(const std::vector<HostInterfaces>& hosts) {
  NetworkChoice choice;
  choice.how = NetworkChoice::How::kLoopback;
  for (const HostInterfaces& h : hosts) {
    const NetworkInterface* lo = nullptr;
    for (const NetworkInterface& i : h.interfaces) {
      if (i.loopback && i.up && !i.preferred_address().empty()) {
        lo = &i;
        break;
      }
    }
    if (lo == nullptr) {
      throw NetworkError(fmt::format(
          "every host of the job is this machine, but it has no loopback interface that is up "
          "with an address (it has {}); bring lo up or choose one with --network-interfaces",
          describe_interfaces(h.interfaces)));
    }
    choice.hosts.push_back(HostChoice{h.host, lo->name, lo->preferred_address(), {lo->name}, {}});
  }
  return choice;
}

NetworkChoice choose_discovered(const std::vector<HostInterfaces>& hosts,
                                const Reachability* reach) {
  const std::size_t n = hosts.size();
  if (n > 1 && (reach == nullptr || reach->reached.size() != n)) {
    throw std::invalid_argument(
        "choose_interfaces: discovery over several hosts needs a Reachability per host");
  }
  // Per host: candidate interfaces that every other host reached.
  std::vector<std::vector<std::string>> routable(n);
  for (std::size_t t = 0; t < n; ++t) {
    for (const NetworkInterface& i : hosts[t].interfaces) {
      if (!candidate(i)) continue;
      bool all = true;
      for (std::size_t s = 0; s < n && all; ++s) {
        if (s == t) continue;
        auto it = reach->reached[t].find(i.name);
        all = it != reach->reached[t].end() && it->second.count(s) != 0;
      }
      if (all) routable[t].push_back(i.name);
    }
    routable[t] = sorted_by_rank(hosts[t], routable[t]);
  }
  std::vector<std::string> stranded;
  for (std::size_t t = 0; t < n; ++t) {
    if (routable[t].empty()) stranded.push_back(hosts[t].host);
  }
  if (!stranded.empty()) {
    std::string msg = fmt::format(
        "no network interface of {} is reachable over TCP from every other host, so the job "
        "cannot form its communicators;",
        fmt::join(stranded, ", "));
    if (n > 1) {
      msg += " the probes measured:\n" + format_reachability_table(hosts, *reach);
      msg += fmt::format(
          "check firewalls and routes between the hosts, or name the interfaces with "
          "--network-interfaces (per host: --network-interfaces {}=eth0,{}=ens5)",
          hosts[0].host, hosts[1].host);
    } else {
      msg += fmt::format(" it has {}; name one with --network-interfaces",
                         describe_interfaces(hosts[0].interfaces));
    }
    throw NetworkError(msg);
  }
  // A name every host can use, the best by the hosts' own rankings summed.
  std::vector<std::string> common = routable[0];
  for (std::size_t t = 1; t < n; ++t) {
    std::erase_if(common, [&](const std::string& name) {
      return std::find(routable[t].begin(), routable[t].end(), name) == routable[t].end();
    });
  }
  std::string common_pick;
  if (!common.empty()) {
    auto score = [&](const std::string& name) {
      int hint = 0;
      int virt = 0;
      std::size_t order = 0;
      for (std::size_t t = 0; t < n; ++t) {
        auto [h, v, o] = rank_on_host(hosts[t], name);
        hint += h;
        virt += v;
        order += o;
      }
      return std::tuple(hint, virt, order);
    };
    common_pick = *std::min_element(common.begin(), common.end(),
                                    [&](const std::string& a, const std::string& b) {
                                      return score(a) < score(b);
                                    });
  }
  NetworkChoice choice;
  choice.how = NetworkChoice::How::kDiscovered;
  for (std::size_t t = 0; t < n; ++t) {
    const std::string name = common_pick.empty() ? routable[t].front() : common_pick;
    HostChoice hc;
    hc.host = hosts[t].host;
    hc.iface = name;
    hc.address = find(hosts[t], name)->preferred_address();
    hc.names = {name};
    for (const std::string& r : routable[t]) {
      if (r != name) hc.alternatives.push_back(r);
    }
    choice.hosts.push_back(std::move(hc));
  }
  return choice;
}

}  // namespace

void check_spec_hosts(const NetworkSpec& spec, const std::vector<std::string>& hosts) {
  for (const auto& [host, names] : spec.per_host) {
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) {
      throw UsageError(fmt::format(
          "--network-interfaces {}={}: {} is not a host of this job (hosts: {}); name hosts as "
          "in -H or the hostfile",
          host, names.front(), host, fmt::join(hosts, ", ")));
    }
  }
}

void check_reachable(const std::vector<HostInterfaces>& hosts, const NetworkChoice& choice,
                     const Reachability& reach) {
  std::vector<std::string> problems;
  for (std::size_t t = 0; t < hosts.size(); ++t) {
    const HostChoice& c = choice.hosts.at(t);
    std::vector<std::string> missing;
    const auto& by_iface = reach.reached.at(t);
    const auto it = by_iface.find(c.iface);
    for (std::size_t s = 0; s < hosts.size(); ++s) {
      if (s != t && (it == by_iface.end() || it->second.count(s) == 0))
        missing.push_back(hosts[s].host);
    }
    if (!missing.empty()) {
      problems.push_back(fmt::format("{} on {} ({}) is not reachable over TCP from {}", c.iface,
                                     c.host, c.address, fmt::join(missing, ", ")));
    }
  }
  if (problems.empty()) return;
  std::string msg = fmt::format("--network-interfaces: {}; the probes measured:\n{}",
                                fmt::join(problems, "; "), format_reachability_table(hosts, reach));
  // What discovery would have chosen, as a spec, when there is such a set.
  try {
    const NetworkChoice found = choose_interfaces(hosts, NetworkSpec{}, &reach);
    NetworkSpec fix;
    for (const HostChoice& h : found.hosts) fix.per_host[h.host] = {h.iface};
    if (std::all_of(found.hosts.begin(), found.hosts.end(),
                    [&](const HostChoice& h) { return h.iface == found.hosts.front().iface; })) {
      fix = NetworkSpec{};
      fix.global = {found.hosts.front().iface};
    }
    msg += fmt::format(
        "name interfaces the other hosts reach (e.g. --network-interfaces {}), or "
        "leave the flag out and horarun picks them",
        format_network_spec(fix));
  } catch (const NetworkError&) {
    msg += "check firewalls and routes between the hosts";
  }
  throw NetworkError(msg);
}

const HostChoice& NetworkChoice::for_host(const std::string& host) const {
  for (const HostChoice& h : hosts) {
    if (h.host == host) return h;
  }
  throw std::out_of_range("NetworkChoice::for_host: no host " + host);
}

Reachability make_reachability(const std::vector<std::vector<ProbeEndpoint>>& listeners,
                               const std::vector<std::vector<ConnectOutcome>>& connects) {
  Reachability r;
  r.reached.resize(listeners.size());
  std::map<std::string, std::pair<std::size_t, std::string>> owner;  // target -> (host, iface)
  for (std::size_t t = 0; t < listeners.size(); ++t) {
    for (const ProbeEndpoint& e : listeners[t]) owner[e.target()] = {t, e.iface};
  }
  for (std::size_t s = 0; s < connects.size(); ++s) {
    for (const ConnectOutcome& c : connects[s]) {
      if (!c.ok) continue;
      auto it = owner.find(c.target);
      if (it == owner.end() || it->second.first == s) continue;
      r.reached[it->second.first][it->second.second].insert(s);
    }
  }
  return r;
}

std::vector<ProbeEndpoint> connect_targets_for(
    std::size_t source, const std::vector<std::vector<ProbeEndpoint>>& listeners) {
  std::vector<ProbeEndpoint> out;
  for (std::size_t t = 0; t < listeners.size(); ++t) {
    if (t == source) continue;
    out.insert(out.end(), listeners[t].begin(), listeners[t].end());
  }
  return out;
}

NetworkChoice choose_interfaces(const std::vector<HostInterfaces>& hosts, const NetworkSpec& spec,
                                const Reachability* reach) {
  if (!spec.empty()) return choose_explicit(hosts, spec);
  if (std::all_of(hosts.begin(), hosts.end(), [](const HostInterfaces& h) { return h.local; })) {
    return choose_loopback(hosts);
  }
  return choose_discovered(hosts, reach);
}

std::string describe_choice(const NetworkChoice& choice) {
  std::string out;
  switch (choice.how) {
    case NetworkChoice::How::kExplicit:
      out = "network: interfaces from --network-interfaces:\n";
      break;
    case NetworkChoice::How::kDiscovered:
      out = choice.hosts.size() == 1
                ? "network: the only host's interface (the one SSH reached it on):\n"
                : "network: interfaces discovered (reachable over TCP from every other host):\n";
      break;
    case NetworkChoice::How::kLoopback:
      out = "network: every host is this machine: loopback\n";
      break;
  }
  for (const HostChoice& h : choice.hosts) {
    out += fmt::format("  {}: {} {}", h.host, h.iface, h.address);
    if (h.names.size() > 1) out += fmt::format(" (NCCL_SOCKET_IFNAME {})", fmt::join(h.names, ","));
    if (!h.alternatives.empty())
      out += fmt::format(" (also routable: {})", fmt::join(h.alternatives, ", "));
    out += "\n";
  }
  return out;
}

std::string format_reachability_table(const std::vector<HostInterfaces>& hosts,
                                      const Reachability& reach) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"host", "interface", "address"};
  for (const HostInterfaces& h : hosts) head.push_back("from " + h.host);
  rows.push_back(head);
  for (std::size_t t = 0; t < hosts.size(); ++t) {
    for (const NetworkInterface& i : hosts[t].interfaces) {
      if (!candidate(i)) continue;
      std::vector<std::string> row = {hosts[t].host, i.name, i.preferred_address()};
      const std::set<std::size_t>* from = nullptr;
      if (t < reach.reached.size()) {
        auto it = reach.reached[t].find(i.name);
        if (it != reach.reached[t].end()) from = &it->second;
      }
      for (std::size_t s = 0; s < hosts.size(); ++s) {
        row.push_back(s == t ? "-" : (from != nullptr && from->count(s) != 0 ? "yes" : "no"));
      }
      rows.push_back(std::move(row));
    }
  }
  std::vector<std::size_t> width(head.size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) line += fmt::format("  {:<{}}", row[c], width[c]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string describe_interfaces(const std::vector<NetworkInterface>& interfaces) {
  if (interfaces.empty()) return "no interfaces";
  std::vector<std::string> parts;
  for (const NetworkInterface& i : interfaces) {
    if (!i.up)
      parts.push_back(i.name + " (down)");
    else if (i.addresses.empty())
      parts.push_back(i.name + " (no address)");
    else
      parts.push_back(i.name);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace hora::cli
