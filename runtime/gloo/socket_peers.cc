#include "runtime/gloo/socket_peers.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace hora::detail::gloo {

bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  return false;
}

std::vector<ConnectedSocket> connected_sockets() {
  std::vector<ConnectedSocket> sockets;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return sockets;  // no /proc: errors will show addresses only
  while (dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;
    struct stat st {};
    if (::fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    // Only reads the socket's names; the descriptor stays Gloo's.
    ConnectedSocket socket{static_cast<int>(fd), st.st_ino, {}, {}};
    socklen_t length = sizeof socket.local;
    if (::getsockname(socket.fd, reinterpret_cast<sockaddr*>(&socket.local), &length) != 0) {
      continue;
    }
    length = sizeof socket.peer;
    if (::getpeername(socket.fd, reinterpret_cast<sockaddr*>(&socket.peer), &length) != 0) {
      continue;  // a listening socket (not yet closed): no peer
    }
    sockets.push_back(socket);
  }
  ::closedir(dir);
  return sockets;
}

std::optional<ConnectedSocket> socket_at(const std::vector<ConnectedSocket>& sockets,
                                         const sockaddr_storage& local,
                                         const sockaddr_storage* peer) {
  std::optional<ConnectedSocket> found;
  for (const ConnectedSocket& socket : sockets) {
    if (!same_endpoint(socket.local, local)) continue;
    if (peer != nullptr && !same_endpoint(socket.peer, *peer)) continue;
    if (found) return std::nullopt;
    found = socket;
  }
  return found;
}

}  // namespace hora::detail::gloo
