// What a rank knows about the job, read once from the environment (docs/environment.md).
// Internal to libhora: the Gloo and NCCL backends and the engine are built from it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "rendezvous/client.h"

namespace hora::detail {

struct WorldInfo {
  static constexpr std::chrono::seconds kDefaultTimeout{30};
  static constexpr std::chrono::seconds kDefaultStartTimeout{30};

  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  int host_index = 0;           // HORA_HOST_INDEX: identifies the local group
  std::string hostname;         // HORA_HOSTNAME (or gethostname() in a world of one)
  std::string rendezvous_host;  // empty in a world of one (no launcher)
  std::uint16_t rendezvous_port = 0;
  std::string iface;  // HORA_IFACE; empty: the interface of the rendezvous address
  rdv::Secret secret{};
  std::chrono::milliseconds timeout = kDefaultTimeout;             // HORA_TIMEOUT_SECONDS
  std::chrono::milliseconds start_timeout = kDefaultStartTimeout;  // HORA_START_TIMEOUT
  bool shm = true;                  // HORA_SHM: shared memory between the ranks of a host
  int hierarchical_allreduce = -1;  // HORA_HIERARCHICAL_ALLREDUCE: -1 by layout, 0 off, 1 on
  // A process set's world (Runtime's set constructor, runtime/process/runtime.h): rank and size are
  // the set's, set_id its id (0: the job itself), global_rank this rank in the job (for messages).
  int set_id = 0;
  int global_rank = -1;

  bool launched() const { return !rendezvous_host.empty(); }
};

// Looks a variable up; returns nullptr when it is not set. The default reads ::getenv.
using EnvLookup = std::function<const char*(const char* name)>;

// Reads HORA_* variables. Without HORA_RANK: a world of one. Malformed values throw
// hora::UsageError naming the variable, its value and what was expected.
WorldInfo world_from_environment();
WorldInfo world_from_environment(const EnvLookup& lookup);

// "host:port" or "[v6addr]:port" -> host and port. Throws hora::UsageError naming `what`.
void parse_host_port(const std::string& text, const char* what, std::string& host,
                     std::uint16_t& port);

}  // namespace hora::detail
