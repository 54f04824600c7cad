// The allreduce of a group of 2 on sync pairs (sync_policy.h), for buffers of any size: one
// full-duplex swap of the whole buffer, in chunks, each rank reducing what it received (the
// lower rank's data first, so both compute the same bits).
//
// Why: Gloo's ring on the async pairs moved 1 MB between two hosts in about four times what a
// plain socket swap of the same bytes took (docs/spark.md, "The floor under any allreduce").
// sync_allreduce.h swaps whole buffers on the sync pairs already, but both ranks write before
// they read, so a message larger than the socket buffers would block both writers. In chunks of
// kPairSwapChunkBytes, with the next chunk's receive registered before this chunk is sent, a rank
// sends chunk c + 1 only after it has read the peer's chunk c: at most two chunks are unread in
// either direction, within kSyncMaxBytesLimit.
#pragma once

#include <cstddef>
#include <vector>

#include <gloo/transport/pair.h>

#include "runtime/core/reduce.h"

namespace hora::detail::gloo {

inline constexpr std::size_t kPairSwapChunkBytes = 64 * 1024;

// data: count elements of element_size bytes, reduced in place with the peer's same-sized
// buffer. The chunks alternate between slots first_slot and first_slot + 1 (the peer uses the
// same two). scratch: the two chunks' inboxes, grown as needed and kept between calls. Every
// wait is bounded by the sync pairs' timeout; Gloo's errors reach the caller as exceptions.
void pair_swap(::gloo::transport::Pair& pair, bool mine_first, unsigned char* data,
               std::size_t count, std::size_t element_size, ReduceFn reduce, int first_slot,
               std::vector<unsigned char>& scratch);

}  // namespace hora::detail::gloo
