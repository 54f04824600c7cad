// A local group in a test: n forked processes, each forming a ShmGroup on one real segment and
// running a body; or n threads in this process doing the same.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "runtime/shm/shm_group.h"

namespace hora::test {

// A segment name of a fresh test job (a random secret per call).
std::string fresh_segment_name();

// Options for local rank `rank` of `size`; global rank 10 + rank, so messages that name the
// global rank are told apart from local ranks.
detail::shm::ShmOptions shm_options(int rank, int size, std::size_t region_bytes,
                                    std::chrono::milliseconds timeout);

// The body returns "" on success or what went wrong.
using ShmBody = std::function<std::string(detail::shm::ShmGroup& group, int rank)>;

struct ChildOutcome {
  pid_t pid = 0;
  int status = 0;      // waitpid status
  std::string report;  // the body's text, or "<ExceptionType>[ peer=<p>]: <what()>"
  double seconds = 0;  // from fork to the end of its report, as the child measured it
};

// Forks `size` children; each forms the group (start deadline 10 s) and runs body. `meanwhile`
// runs in the parent after forking (e.g. to kill one). Children that are killed report "".
// Children are reaped only after every report pipe reached EOF.
std::vector<ChildOutcome> run_forked(
    int size, const std::string& name, std::size_t region_bytes, std::chrono::milliseconds timeout,
    const ShmBody& body, const std::function<void(const std::vector<pid_t>&)>& meanwhile = {});

// The same with threads (one ShmGroup each; pids are all this process's).
std::vector<std::string> run_threads(int size, const std::string& name, std::size_t region_bytes,
                                     std::chrono::milliseconds timeout, const ShmBody& body);

// Names of /dev/shm entries that start with `prefix` (without the leading '/').
std::vector<std::string> shm_entries(const std::string& prefix);

// "<Type>[ peer=<p>]: <what>" for the exception in flight (call from a catch block).
std::string describe_current_exception();

}  // namespace hora::test
