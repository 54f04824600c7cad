// The allreduce of a group of 2 on sync pairs (sync_policy.h), for buffers of any size: one
// full-duplex swap of the whole buffer on the pair's connection, each rank reducing what it
// received (the lower rank's data first, so both compute the same bits).
//
// Why: Gloo's ring on the async pairs moved 1 MB between two hosts in about four times what a
// plain socket swap of the same bytes took (docs/spark.md, "The floor under any allreduce").
// Gloo's sync pairs block in write before they read, so a message larger than the socket buffers
// would block both writers. Swapped in 64 KB chunks of Gloo's bound buffers instead, the two
// ranks went in lockstep, and each chunk's blocking read woke up for every segment that came:
// 2.0 ms for 1 MB where the plain swap took 0.7. Here each rank writes what the socket takes
// and reads what has come, never blocking in either, and waits in poll(2) for the next chance:
// neither side can stall the other, whatever the size.
//
// The bytes travel on the pair's connection between Gloo's messages. That is sound because in
// sync mode Gloo reads exactly one message (header, then payload) per receive, in the caller's
// thread, and its device thread no longer watches the socket: once every Gloo message of the
// op before the swap has been read on both sides, each direction of the stream carries only
// what this swap writes, and the swap reads exactly the peer's bytes, leaving the stream where
// Gloo's next message begins.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/core/reduce.h"
#include "runtime/gloo/mesh_context.h"

namespace hora::detail::gloo {

// Below this many bytes the group of 2 keeps sync_allreduce's one Gloo message each way (a
// single write then read, which the socket buffers hold) and the checked path its [check | data]
// message.
inline constexpr std::size_t kPairSwapMinBytes = 64 * 1024;

// data: count elements of element_size bytes, reduced in place with scope rank `peer`'s
// same-sized buffer, on a context in sync mode (MeshContext::make_sync). inbox: where the
// peer's bytes land, grown as needed and kept between calls. Waits at most the context's sync
// timeout without progress. Errors are gloo::IoException with Gloo's words ("Connection closed
// by peer", "Read timeout") and the peer's address, so GlooBackend::fail names the peer as it
// does for Gloo's own.
void pair_swap(MeshContext& context, int peer, unsigned char* data, std::size_t count,
               std::size_t element_size, ReduceFn reduce, std::vector<unsigned char>& inbox);

}  // namespace hora::detail::gloo
