// Finding the remote end of a TCP socket Gloo owns, from outside Gloo.
//
// Gloo names a peer in its errors by the socket's peer address ("Connection closed by peer
// [127.0.0.1]:51234"). When this rank accepted the pair's connection, that is the peer's
// ephemeral port, which no public Gloo API reveals (the pair's descriptor is private, and
// Debian's libgloo-dev lacks the header that would let us include gloo/transport/tcp/pair.h).
// This scans /proc/self/fd for the TCP socket whose local address is the pair's listening
// address and returns its peer address, so error messages can name the rank.
#pragma once

#include <sys/socket.h>

#include <optional>

namespace hora::detail::gloo {

// The peer address of the one connected TCP socket of this process bound to `local`; nothing
// when there is none, or more than one (then the answer would be a guess).
std::optional<sockaddr_storage> peer_of_local_address(const sockaddr_storage& local);

// Same family, address and port (IPv6 flow info and scope ignored).
bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b);

}  // namespace hora::detail::gloo
