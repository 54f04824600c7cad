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
  if (!out.error.empty()) return out;
  if (out.soft >= out.hard) {
    // Nothing to raise, yet the caller asked to: say so, so a low limit is not passed silently
    // (`ulimit -n 1024` sets both limits).
    if (out.hard != RLIM_INFINITY) {
      out.error = fmt::format("the soft limit is already the hard limit {}", out.hard);
    }
    return out;
  }
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
