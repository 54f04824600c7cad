// Reduce-scatter on a Gloo context (Gloo has no function-style reduce_scatter).
//
// A ring (ring_allreduce.h's reduce-scatter steps, pipelined in 1 MiB segments): with n ranks,
// at step s (0..n-2) rank r sends block (r-s-1) mod n to rank r+1 and receives block (r-s-2)
// mod n from rank r-1, reducing it into its own copy. Each block travels n-1 hops and collects
// every rank's contribution; after the last step rank r holds the fully reduced block r. Every
// rank sends and receives (n-1)/n of the data, the optimum.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/core/reduce.h"
#include "runtime/gloo/mesh_context.h"

namespace hora::detail::gloo {

// Gloo slot prefix for this algorithm; Gloo's own prefixes are 0x01..0x08.
inline constexpr std::uint8_t kReduceScatterSlotPrefix = 0x48;

// The buffers a scope keeps across calls (no allocation, no page faults per call).
struct RingBuffers {
  std::vector<unsigned char> work;     // the running partial sums: the input's size
  std::vector<unsigned char> scratch;  // two segments
};

// block_counts[i]: elements of block i (rank i's result); their sum is the input's length.
// recvbuf receives block_counts[context.rank] elements. sendbuf is not modified.
void ring_reduce_scatter(MeshContext& context, const void* sendbuf, void* recvbuf,
                         const std::vector<std::size_t>& block_counts, std::size_t element_size,
                         ReduceFn reduce, std::uint32_t tag, std::chrono::milliseconds timeout,
                         RingBuffers& buffers);

}  // namespace hora::detail::gloo
