#include "common/fd_limit.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>

namespace hora {

FdLimit fd_limit() {
  FdLimit out;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    out.error = fmt::format("getrlimit(RLIMIT_NOFILE): {}", std::strerror(errno));
    return out;
  }
  out.soft = out.soft_before = rl.rlim_cur;
  out.hard = rl.rlim_max;
  return out;
}

FdLimit raise_fd_limit() {
  FdLimit out = fd_limit();
  if (!out.error.empty() || out.soft >= out.hard) return out;
  rlimit rl{};
  rl.rlim_cur = out.hard;
  rl.rlim_max = out.hard;
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    out.error = fmt::format("setrlimit(RLIMIT_NOFILE, {}): {}", out.hard, std::strerror(errno));
    return out;
  }
  out.soft = out.hard;
  return out;
}

}  // namespace hora
