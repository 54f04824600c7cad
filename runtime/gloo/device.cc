#include "runtime/gloo/device.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/common/logging.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <hora/error.h>

#include "runtime/core/error_translation.h"

namespace hora::detail::gloo {
namespace {

std::string numeric(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  } else if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
  }
  return text;
}

bool is_link_local_v6(const sockaddr* addr) {
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
  return IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr);
}

DeviceAddress from_interface(const WorldInfo& world) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    throw Error(fmt::format("{}: cannot list network interfaces: {}", who(world),
                            std::strerror(errno)),
                world.rank, world.hostname);
  }
  std::string v4;
  std::string v6;
  std::map<std::string, std::set<std::string>> seen;  // every interface and its addresses
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_name == nullptr) continue;
    auto& addresses = seen[it->ifa_name];
    if (it->ifa_addr == nullptr) continue;
    const int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    addresses.insert(numeric(it->ifa_addr));
    if (world.iface != it->ifa_name) continue;
    if (family == AF_INET && v4.empty()) v4 = numeric(it->ifa_addr);
    if (family == AF_INET6 && v6.empty() && !is_link_local_v6(it->ifa_addr)) {
      v6 = numeric(it->ifa_addr);
    }
  }
  freeifaddrs(list);

  if (!v4.empty()) return {v4, fmt::format("address of interface {} (HORA_IFACE)", world.iface)};
  if (!v6.empty()) return {v6, fmt::format("address of interface {} (HORA_IFACE)", world.iface)};

  std::string available;
  for (const auto& [name, addresses] : seen) {
    if (!available.empty()) available += ", ";
    available += name;
    if (!addresses.empty()) available += fmt::format(" ({})", fmt::join(addresses, " "));
  }
  const bool exists = seen.count(world.iface) != 0;
  throw UsageError(fmt::format("{}: HORA_IFACE={} {}; this host has: {}. Choose another with "
                               "horarun --network-interfaces",
                               who(world), world.iface,
                               exists ? "has no usable IPv4 or global IPv6 address"
                                      : "is not an interface of this host",
                               available.empty() ? "no interfaces" : available),
                   world.rank, world.hostname);
}

DeviceAddress from_route(const WorldInfo& world) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* result = nullptr;
  const std::string port = std::to_string(world.rendezvous_port);
  const int rc = getaddrinfo(world.rendezvous_host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0) {
    throw ConnectionError(
        fmt::format("{}: cannot resolve the rendezvous host {} (HORA_RENDEZVOUS): {}", who(world),
                    world.rendezvous_host, gai_strerror(rc)),
        world.rank, world.hostname);
  }
  std::string last_error = "no address";
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    // connect() on a UDP socket only selects a route and a source address; nothing is sent.
    const int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      ::close(fd);
      const std::string address = numeric(reinterpret_cast<sockaddr*>(&local));
      freeaddrinfo(result);
      return {address, fmt::format("source address of the route to the rendezvous server {}:{}",
                                   world.rendezvous_host, world.rendezvous_port)};
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(result);
  throw ConnectionError(
      fmt::format("{}: no route to the rendezvous server {}:{}: {}; set HORA_IFACE "
                  "(horarun --network-interfaces) to the interface peers can reach",
                  who(world), world.rendezvous_host, world.rendezvous_port, last_error),
      world.rank, world.hostname);
}

}  // namespace

DeviceAddress choose_device_address(const WorldInfo& world) {
  if (!world.iface.empty()) return from_interface(world);
  return from_route(world);
}

std::shared_ptr<::gloo::transport::Device> create_device(const WorldInfo& world,
                                                         const DeviceAddress& address) {
  ::gloo::transport::tcp::attr attr;
  attr.hostname = address.address;
  try {
    return ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    // Gloo's EnforceNotMet is not a gloo::Exception; both end up here.
    throw ConnectionError(fmt::format("{}: cannot create the Gloo TCP device on {} ({}): "
                                      "{}; set HORA_IFACE (horarun --network-interfaces)",
                                      who(world), address.address, address.reason, e.what()),
                          world.rank, world.hostname);
  }
}

}  // namespace hora::detail::gloo
