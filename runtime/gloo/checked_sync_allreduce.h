// sync_allreduce.h's recursive doubling with the public API's consistency check (op_check.h)
// in the same messages: each step sends [OpCheck | data] and merges the partner's OpCheck into
// its own, so a small allreduce costs no extra round trip for its check. With bytes == 0 it is
// the check alone (what the other collectives run first on a scope with sync pairs).
//
// Ranks may disagree about the data's size (that is what the check is for), and a header-only
// message meets a fused one when one rank runs a small allreduce and another anything else. So
// every inbox holds the largest message any rank can send here (the OpCheck plus the sync
// threshold, mesh.sync.max_bytes, the same on every rank), nothing a peer sends can overflow it,
// and every rank runs every step whatever it received: all end with the same merged OpCheck.
// A partner's data is reduced only when the merge so far agrees (then its size is this rank's);
// the caller's buffer is written only when the final merge agrees.
//
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/core/reduce.h"
#include "runtime/gloo/mesh_context.h"
#include "runtime/gloo/op_check.h"

namespace hora::detail::gloo {

// A scope's buffers for checked_sync_allreduce, kept between ops (they only grow).
struct SyncScratch {
  std::vector<unsigned char> send;        // [OpCheck | data]: this rank's running result
  std::vector<unsigned char> inbox;       // one message of max_bytes per receive of an op
  std::vector<unsigned char> swap_inbox;  // pair_swap's, for a group of 2's larger buffers
};

inline bool agrees(const OpCheck& c) { return c.lo.signature == c.hi.signature; }

// A group of 2 takes buffers larger than max_bytes too: the OpCheck alone is swapped first, in
// the slot and inbox the first step uses for smaller ones (so a peer that runs a smaller op, or
// the check alone, meets it there and both see the disagreement), and only when the checks
// agree is the data swapped on the pair's connection, straight in `buffer` (pair_swap.h).
//
// buffer: count elements of element_size bytes, reduced in place when every rank agrees
// (count * element_size <= max_bytes, or any size in a group of 2). Returns the merged OpCheck,
// the same on every rank.
OpCheck checked_sync_allreduce(MeshContext& context, const OpCheck& mine, void* buffer,
                               std::size_t count, std::size_t element_size, ReduceFn reduce,
                               std::uint32_t tag, std::size_t max_bytes, SyncScratch& scratch);

}  // namespace hora::detail::gloo
