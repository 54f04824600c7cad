// The Gloo TCP device of a rank: one per process (one epoll thread), shared by the global, local
// and cross contexts. Its pairs listen on one local address, chosen as follows:
//   - HORA_IFACE set: the interface's IPv4 address (else its first global IPv6 address);
//   - otherwise: the source address the kernel would use to reach the rendezvous server, i.e.
//     the interface through which this host reaches the launcher (found with a connected UDP
//     socket: no packet is sent).
#pragma once

#include <memory>
#include <string>

#include <gloo/transport/device.h>

#include "runtime/core/world.h"

namespace hora::detail::gloo {

struct DeviceAddress {
  std::string address;  // numeric IPv4 or IPv6 address
  std::string reason;   // how it was chosen, for logs and errors
};

// Throws hora::UsageError (unknown interface, listing the ones this host has) or
// hora::ConnectionError (no route to the rendezvous host).
DeviceAddress choose_device_address(const WorldInfo& world);

std::shared_ptr<::gloo::transport::Device> create_device(const WorldInfo& world,
                                                         const DeviceAddress& address);

}  // namespace hora::detail::gloo
