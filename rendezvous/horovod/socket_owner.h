// Who owns the other end of a TCP connection accepted on this machine: the peer's socket is
// looked up in /proc/net/tcp (or tcp6) by its local address and port and the address it is
// connected to, and its uid column read. Only sockets of this machine's network namespace are
// found; a peer on another host has none (nullopt).
#pragma once

#include <sys/types.h>

#include <boost/asio/ip/tcp.hpp>
#include <optional>
#include <string>

namespace hora::rdv::horovod {

// The uid owning the socket bound to `peer` and connected to `local` (our accepted socket's
// ends); nullopt when no socket of this machine matches (a remote peer, or it already closed).
std::optional<uid_t> socket_owner(const boost::asio::ip::tcp::endpoint& peer,
                                  const boost::asio::ip::tcp::endpoint& local);

// The /proc/net/tcp spelling of an endpoint ("0100007F:1F90"), for tests.
std::string proc_net_endpoint(const boost::asio::ip::tcp::endpoint& ep);

}  // namespace hora::rdv::horovod
