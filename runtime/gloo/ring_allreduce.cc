#include "runtime/gloo/ring_allreduce.h"

#include <algorithm>

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

namespace hora::detail::gloo {

namespace {

// Whole elements per segment.
std::size_t segment_elements(std::size_t element_size) {
  return std::max<std::size_t>(1, kRingSegmentBytes / element_size);
}

enum class Direction { kSend, kRecv };

// Posts one send to, or one receive from, `peer` per segment of `block` of `buffer`; returns how
// many were posted (each needs its waitSend/waitRecv).
std::size_t post_segments(::gloo::transport::UnboundBuffer& buffer, Direction direction, int peer,
                          std::uint64_t slot, const RingBlock& block, std::size_t segment,
                          std::size_t element_size) {
  std::size_t posted = 0;
  for (std::size_t done = 0; done < block.count; done += segment) {
    const std::size_t offset = (block.offset + done) * element_size;
    const std::size_t bytes = std::min(segment, block.count - done) * element_size;
    if (direction == Direction::kSend) {
      buffer.send(peer, slot, offset, bytes);
    } else {
      buffer.recv(peer, slot, offset, bytes);
    }
    ++posted;
  }
  return posted;
}

}  // namespace

void ring_reduce_steps(MeshContext& context, unsigned char* data,
                       const std::vector<RingBlock>& blocks, std::size_t element_size,
                       ReduceFn reduce, std::uint64_t slot, std::chrono::milliseconds timeout,
                       std::vector<unsigned char>& scratch, int shift) {
  const int n = context.size;
  const int r = context.rank;
  const std::size_t segment = segment_elements(element_size);
  if (scratch.size() < 2 * segment * element_size) scratch.resize(2 * segment * element_size);
  std::size_t total = 0;
  for (const RingBlock& b : blocks) total = std::max(total, b.offset + b.count);
  auto data_buffer =
      context.createUnboundBuffer(data, std::max<std::size_t>(total, 1) * element_size);
  auto scratch_buffer = context.createUnboundBuffer(scratch.data(), scratch.size());
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  auto mod = [n](int v) { return ((v % n) + n) % n; };
  for (int step = 0; step < n - 1; ++step) {
    const RingBlock& out = blocks[mod(r + shift - step)];
    const RingBlock& in = blocks[mod(r + shift - step - 1)];
    const std::size_t segments = (in.count + segment - 1) / segment;
    // Two receives in flight, into alternating halves of the scratch; they complete in the
    // order they were posted (one peer, one slot).
    auto post = [&](std::size_t k) {
      const std::size_t c = std::min(segment, in.count - k * segment);
      scratch_buffer->recv(left, slot, (k % 2) * segment * element_size, c * element_size);
    };
    for (std::size_t k = 0; k < std::min<std::size_t>(2, segments); ++k) post(k);
    const std::size_t sends =
        post_segments(*data_buffer, Direction::kSend, right, slot, out, segment, element_size);
    for (std::size_t k = 0; k < segments; ++k) {
      scratch_buffer->waitRecv(timeout);
      const std::size_t c = std::min(segment, in.count - k * segment);
      unsigned char* target = data + (in.offset + k * segment) * element_size;
      reduce(target, target, scratch.data() + (k % 2) * segment * element_size, c);
      if (k + 2 < segments) post(k + 2);
    }
    // The block sent must not change under its sends; a later step may reduce into it.
    for (std::size_t i = 0; i < sends; ++i) data_buffer->waitSend(timeout);
  }
}

void ring_allreduce(MeshContext& context, void* buffer, std::size_t count, std::size_t element_size,
                    ReduceFn reduce, std::uint32_t tag, std::chrono::milliseconds timeout,
                    std::vector<unsigned char>& scratch) {
  const int n = context.size;
  const int r = context.rank;
  if (n < 2 || count == 0) return;
  // Blocks as reducescatter_count splits: the first count % n get one more element.
  std::vector<RingBlock> blocks(static_cast<std::size_t>(n));
  std::size_t at = 0;
  for (int i = 0; i < n; ++i) {
    const std::size_t c = count / n + (static_cast<std::size_t>(i) < count % n ? 1 : 0);
    blocks[i] = {at, c};
    at += c;
  }
  auto* data = static_cast<unsigned char*>(buffer);
  ring_reduce_steps(context, data, blocks, element_size, reduce,
                    ::gloo::Slot::build(kRingReduceSlotPrefix, tag), timeout, scratch, 0);
  const std::size_t segment = segment_elements(element_size);
  auto data_buffer = context.createUnboundBuffer(data, count * element_size);
  const std::uint64_t gather_slot = ::gloo::Slot::build(kRingGatherSlotPrefix, tag);
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  auto mod = [n](int v) { return ((v % n) + n) % n; };
  for (int step = 0; step < n - 1; ++step) {
    const RingBlock& out = blocks[mod(r + 1 - step)];
    const RingBlock& in = blocks[mod(r - step)];
    const std::size_t recvs =
        post_segments(*data_buffer, Direction::kRecv, left, gather_slot, in, segment, element_size);
    const std::size_t sends = post_segments(*data_buffer, Direction::kSend, right, gather_slot, out,
                                            segment, element_size);
    for (std::size_t i = 0; i < recvs; ++i) data_buffer->waitRecv(timeout);
    for (std::size_t i = 0; i < sends; ++i) data_buffer->waitSend(timeout);
  }
}

}  // namespace hora::detail::gloo
