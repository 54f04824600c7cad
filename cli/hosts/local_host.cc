#include "cli/hosts/local_host.h"
#include "common/text.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>

namespace hora::cli {
namespace {

// The canonical text form of a literal IPv4/IPv6 address (zone id dropped), or "" if `text`
// is not one.
std::string canonical_address(const std::string& text) {
  std::string addr = text.substr(0, text.find('%'));
  char buf[INET6_ADDRSTRLEN];
  in_addr v4{};
  if (::inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    return ::inet_ntop(AF_INET, &v4, buf, sizeof buf) ? buf : "";
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, addr.c_str(), &v6) == 1) {
    return ::inet_ntop(AF_INET6, &v6, buf, sizeof buf) ? buf : "";
  }
  return {};
}

}  // namespace

LocalHost LocalHost::discover() {
  std::set<std::string> names;
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') {
    std::string h(host);
    names.insert(h);
    names.insert(h.substr(0, h.find('.')));
  }
  std::set<std::string> addresses;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr) continue;
      char buf[INET6_ADDRSTRLEN];
      if (i->ifa_addr->sa_family == AF_INET) {
        auto* sin = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
        if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf)) addresses.insert(buf);
      } else if (i->ifa_addr->sa_family == AF_INET6) {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
        if (::inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof buf)) addresses.insert(buf);
      }
    }
    ::freeifaddrs(list);
  }
  // getifaddrs() failing leaves only the loopback rules: a safe answer (treat as remote).
  return LocalHost(std::move(names), std::move(addresses));
}

LocalHost::LocalHost(std::set<std::string> names, std::set<std::string> addresses) {
  for (const std::string& n : names) names_.insert(lower(n));
  for (const std::string& a : addresses) {
    std::string c = canonical_address(a);
    if (!c.empty()) addresses_.insert(c);
  }
}

bool LocalHost::is_local(const std::string& name) const {
  const std::string n = lower(name);
  if (n == "localhost" || n == "localhost.localdomain" || n == "ip6-localhost" ||
      n == "ip6-loopback") {
    return true;
  }
  const std::string addr = canonical_address(n);
  if (!addr.empty()) {
    if (addr == "::1") return true;
    in_addr v4{};
    if (::inet_pton(AF_INET, addr.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) {
      return true;
    }
    return addresses_.count(addr) != 0;
  }
  return names_.count(n) != 0;
}

}  // namespace hora::cli
