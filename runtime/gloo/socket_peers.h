// Finding the remote end of a TCP socket Gloo owns, from outside Gloo.
//
// Gloo names a peer in its errors by the socket's peer address ("Connection closed by peer
// [127.0.0.1]:51234"). When this rank accepted the pair's connection, that is the peer's
// ephemeral port, which no public Gloo API reveals (the pair's descriptor is private, and
// Debian's libgloo-dev lacks the header that would let us include gloo/transport/tcp/pair.h).
// This scans /proc/self/fd for the TCP socket whose local address is the pair's listening
// address and returns its peer address, so error messages can name the rank. The same scan finds
// the descriptors of sync pairs (mesh_context.h), so that an abort can shut their sockets down.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <optional>
#include <vector>

namespace hora::detail::gloo {

// A connected socket of this process (its descriptor stays Gloo's).
struct ConnectedSocket {
  int fd = -1;
  ino_t inode = 0;  // tells the socket apart from a later one that reuses the descriptor
  sockaddr_storage local{};
  sockaddr_storage peer{};
};

// Every connected socket of this process, from one scan of /proc/self/fd (empty without /proc).
std::vector<ConnectedSocket> connected_sockets();

// The one socket of `sockets` bound to `local` (and connected to `peer`, when given); nothing
// when there is none, or more than one (then the answer would be a guess). Without the peer the
// local address alone can be ambiguous: Linux lets outgoing connections to different peers
// share an ephemeral port, which may be the port of a pair's listener that already closed.
std::optional<ConnectedSocket> socket_at(const std::vector<ConnectedSocket>& sockets,
                                         const sockaddr_storage& local,
                                         const sockaddr_storage* peer = nullptr);

// Same family, address and port (IPv6 flow info and scope ignored).
bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b);

}  // namespace hora::detail::gloo
