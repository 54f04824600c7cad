// The process's limit on open file descriptors (RLIMIT_NOFILE).
#pragma once

#include <cstdint>
#include <string>

namespace hora {

struct FdLimit {
  std::uint64_t soft = 0;  // after the call
  std::uint64_t hard = 0;
  std::uint64_t soft_before = 0;
  std::string error;  // why the soft limit could not be raised; empty on success
};

// Raises the soft RLIMIT_NOFILE to the hard limit, as a launcher that holds one connection per
// rank (and whatever a hostile peer opens) should at start. Never lowers it. On failure the
// limits are unchanged and `error` says why ("setrlimit(RLIMIT_NOFILE, 4096): ..."); a finite
// soft limit that already equals the hard one is reported the same way ("the soft limit is
// already the hard limit 1024"), so a caller can warn about a low limit it cannot raise.
FdLimit raise_fd_limit();

// The current limits, without changing them.
FdLimit fd_limit();

}  // namespace hora
