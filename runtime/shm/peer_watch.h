// Tells whether the processes of a local group are still alive, without a signal and
// without being their parent: a pidfd per peer process (poll says readable once the process
// exited, even before anyone reaps it). Where pidfd_open is missing (Linux < 5.3), kill(pid, 0)
// plus the zombie state in /proc stands in.
#pragma once

#include <sys/types.h>

#include <vector>

#include "common/unique_fd.h"

namespace hora::detail::shm {

class PeerWatch {
 public:
  PeerWatch() = default;
  // pids[i] is local rank i's process; entries equal to this process's pid are never watched
  // (ranks that are threads of one process die together).
  explicit PeerWatch(const std::vector<pid_t>& pids);

  // True when local rank i's process has exited.
  bool dead(int i) const;

 private:
  std::vector<pid_t> pids_;
  std::vector<UniqueFd> fds_;  // -1 where not watched or pidfd_open failed
};

}  // namespace hora::detail::shm
