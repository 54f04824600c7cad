// How the ranks of one NCCL communicator agree on its ncclUniqueId, through the hora rendezvous.
//
// Protocol (one key per communicator, never rewritten within a job):
//   key   nccl/<scope>/<group>/uid   scope: global | local | cross
//                                    group: 0 | host_index | local_rank
//   value the 128 bytes of ncclUniqueId (NCCL_UNIQUE_ID_BYTES), as ncclGetUniqueId wrote them;
//         they hold the root's bootstrap address, so they are only meaningful within this job.
// Rank 0 of the communicator creates the id and set()s the key; every other rank get()s it, which
// blocks on the server until the key exists or the deadline passes. A communicator of one rank
// needs no exchange and never touches the client.
//
// This file has no CUDA or NCCL in it: the id is produced by a callable, so the exchange is
// tested against a real rendezvous server on machines without a GPU
// (test/runtime/nccl/unique_id_test.cc).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <hora/types.h>

#include "runtime/core/world.h"

namespace hora::rdv {
class Client;
}

namespace hora::detail::nccl {

inline constexpr std::size_t kUniqueIdBytes =
    128;  // NCCL_UNIQUE_ID_BYTES (static_assert'ed in backend.cc)
using UniqueId = std::array<std::uint8_t, kUniqueIdBytes>;

// One communicator as seen from one rank.
struct CommGroup {
  Scope scope = Scope::kGlobal;
  int group = 0;  // 0 (global), host_index (local), local_rank (cross)
  int rank = 0;   // this rank's rank within the communicator
  int nranks = 1;
};

// The communicator this rank belongs to for `scope`, from the world's coordinates.
CommGroup comm_group(const WorldInfo& world, Scope scope);

// "nccl/<scope>/<group>/uid"
std::string unique_id_key(const CommGroup& group);

// For messages: "the global communicator (8 ranks)", "the local communicator of host #1 (4
// ranks)", "the cross communicator of local rank 2 (3 ranks)".
std::string describe(const CommGroup& group);

// For messages: "rank 3 of 8 on server2" (the host as horarun named it).
std::string sized_who(const WorldInfo& world);

// Returns the id every rank of `group` passes to ncclCommInitRankConfig.
//   group.rank == 0: calls get_unique_id() and publishes the result (unless nranks == 1).
//   otherwise:       fetches it, waiting at most until `deadline`.
// client may be nullptr only when group.nranks == 1. Rendezvous failures become hora errors
// that name this rank and host, the key, the communicator and who was expected to publish it:
// TimeoutError (deadline), AbortedError (the launcher aborted), ConnectionError (the connection
// failed), MismatchError (the stored value is not 128 bytes).
UniqueId exchange_unique_id(rdv::Client* client, const WorldInfo& world, const CommGroup& group,
                            const std::function<UniqueId()>& get_unique_id,
                            std::chrono::steady_clock::time_point deadline);

}  // namespace hora::detail::nccl
