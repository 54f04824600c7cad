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

std::optional<sockaddr_storage> peer_of_local_address(const sockaddr_storage& local) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;  // no /proc: errors will show addresses only
  std::optional<sockaddr_storage> found;
  int matches = 0;
  while (dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;
    struct stat st {};
    if (::fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    // Only reads the socket's names; the descriptor stays Gloo's.
    sockaddr_storage mine{};
    socklen_t length = sizeof mine;
    if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&mine), &length) != 0) {
      continue;
    }
    if (!same_endpoint(mine, local)) continue;
    sockaddr_storage peer{};
    length = sizeof peer;
    if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &length) != 0) {
      continue;  // the listening socket itself (not yet closed): no peer
    }
    found = peer;
    ++matches;
  }
  ::closedir(dir);
  if (matches != 1) return std::nullopt;
  return found;
}

}  // namespace hora::detail::gloo
