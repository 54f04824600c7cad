#include "cli/network/source_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/unique_fd.h"

namespace hora::cli {

std::string source_address_towards(const std::string& address) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(9);
    len = sizeof *v4;
  } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(9);
    len = sizeof *v6;
  } else {
    return {};
  }
  UniqueFd fd(::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) return {};
  sockaddr_storage me{};
  socklen_t me_len = sizeof me;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&me), &me_len) != 0) return {};
  char buf[INET6_ADDRSTRLEN] = {};
  const void* a = me.ss_family == AF_INET
                      ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&me)->sin_addr)
                      : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&me)->sin6_addr);
  if (::inet_ntop(me.ss_family, a, buf, sizeof buf) == nullptr) return {};
  return buf;
}

}  // namespace hora::cli
