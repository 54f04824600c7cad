#include "runtime/shm/peer_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace hora::detail::shm {
namespace {

int pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

bool zombie(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // gone
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

}  // namespace

PeerWatch::PeerWatch(const std::vector<pid_t>& pids) : pids_(pids) {
  const pid_t self = ::getpid();
  for (pid_t pid : pids_) {
    fds_.emplace_back(pid == self || pid <= 0 ? -1 : pidfd_open(pid));
  }
}

bool PeerWatch::dead(int i) const {
  const pid_t pid = pids_.at(static_cast<std::size_t>(i));
  if (pid <= 0 || pid == ::getpid()) return false;
  if (fds_[static_cast<std::size_t>(i)]) {
    pollfd p{fds_[static_cast<std::size_t>(i)].get(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP)) != 0;
  }
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  return zombie(pid);
}

}  // namespace hora::detail::shm
