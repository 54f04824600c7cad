// A pipelined ring allreduce for large buffers on a Gloo context (what the Gloo backend runs for
// allreduces of at least kRingAllreduceMinBytes; Gloo's own ::gloo::allreduce below that).
//
// The buffer is cut into n blocks (reducescatter_count's split). Reduce-scatter: at step s
// (0..n-2) rank r sends block (r - s) mod n to rank r+1 and receives block (r - s - 1) mod n
// from rank r-1, reducing it into its own; after n-1 steps rank r holds block (r + 1) mod n
// fully reduced. Allgather: at step s rank r sends block (r + 1 - s) mod n and receives block
// (r - s) mod n straight into the buffer. Each block is summed in one order along the ring, so
// every rank ends with the same bits.
//
// Inside a step, blocks move in segments of at most kRingSegmentBytes: two receives stay posted
// into a scratch of two segments while this thread reduces the one that arrived, so the wire and
// the reduction overlap, and nothing is allocated or copied per call beyond that scratch (kept
// by the caller across calls). HORA_GLOO_RING=0 switches back to ::gloo::allreduce, for
// side-by-side measurements (docs/benchmarks-torch.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/core/reduce.h"
#include "runtime/gloo/mesh_context.h"

namespace hora::detail::gloo {

inline constexpr std::size_t kRingAllreduceMinBytes = std::size_t{1} << 20;
inline constexpr std::size_t kRingSegmentBytes = std::size_t{1} << 20;
// Gloo slot prefixes of the two phases; Gloo's own are 0x01..0x08, reduce-scatter's 0x48.
inline constexpr std::uint8_t kRingReduceSlotPrefix = 0x49;
inline constexpr std::uint8_t kRingGatherSlotPrefix = 0x4A;

// One span of the buffer: block i of a ring (offset and count in elements).
struct RingBlock {
  std::size_t offset = 0;
  std::size_t count = 0;
};

// The reduce-scatter steps of a ring on `data` (blocks[i] is block i): at step s (0..n-2) this
// rank r sends block (r + shift - s) mod n to rank r+1 and receives block (r + shift - s - 1)
// mod n from rank r-1, reducing it into its own copy, segment by segment with two receives in
// flight. Afterwards rank r holds block (r + shift + 1) mod n fully reduced: shift 0 for the
// allreduce, -1 for reducescatter (rank r keeps block r). scratch: the caller's, reused.
void ring_reduce_steps(MeshContext& context, unsigned char* data,
                       const std::vector<RingBlock>& blocks, std::size_t element_size,
                       ReduceFn reduce, std::uint64_t slot, std::chrono::milliseconds timeout,
                       std::vector<unsigned char>& scratch, int shift);

// In place on `buffer` (count elements of element_size bytes). scratch: the caller's, reused.
void ring_allreduce(MeshContext& context, void* buffer, std::size_t count, std::size_t element_size,
                    ReduceFn reduce, std::uint32_t tag, std::chrono::milliseconds timeout,
                    std::vector<unsigned char>& scratch);

}  // namespace hora::detail::gloo
