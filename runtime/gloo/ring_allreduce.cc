#include "runtime/gloo/ring_allreduce.h"

#include <algorithm>

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

namespace hora::detail::gloo {
namespace {

struct Block {
  std::size_t offset = 0;  // in elements
  std::size_t count = 0;
};

}  // namespace

void ring_allreduce(MeshContext& context, void* buffer, std::size_t count, std::size_t element_size,
                    ReduceFn reduce, std::uint32_t tag, std::chrono::milliseconds timeout,
                    std::vector<unsigned char>& scratch) {
  const int n = context.size;
  const int r = context.rank;
  if (n < 2 || count == 0) return;
  // Blocks as reducescatter_count splits: the first count % n get one more element.
  std::vector<Block> blocks(static_cast<std::size_t>(n));
  std::size_t at = 0;
  for (int i = 0; i < n; ++i) {
    const std::size_t c = count / n + (static_cast<std::size_t>(i) < count % n ? 1 : 0);
    blocks[i] = {at, c};
    at += c;
  }
  // Whole elements per segment.
  const std::size_t segment = std::max<std::size_t>(1, kRingSegmentBytes / element_size);
  if (scratch.size() < 2 * segment * element_size) scratch.resize(2 * segment * element_size);
  auto* data = static_cast<unsigned char*>(buffer);
  auto data_buffer = context.createUnboundBuffer(data, count * element_size);
  auto scratch_buffer = context.createUnboundBuffer(scratch.data(), scratch.size());
  const std::uint64_t reduce_slot = ::gloo::Slot::build(kRingReduceSlotPrefix, tag);
  const std::uint64_t gather_slot = ::gloo::Slot::build(kRingGatherSlotPrefix, tag);
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  auto mod = [n](int v) { return ((v % n) + n) % n; };

  // Sends every segment of `block` to the right; the caller waits for them (waitSend each).
  auto send_segments = [&](const Block& block, std::uint64_t slot) {
    std::size_t sends = 0;
    for (std::size_t done = 0; done < block.count; done += segment) {
      const std::size_t c = std::min(segment, block.count - done);
      data_buffer->send(right, slot, (block.offset + done) * element_size, c * element_size);
      ++sends;
    }
    return sends;
  };

  for (int step = 0; step < n - 1; ++step) {
    const Block& out = blocks[mod(r - step)];
    const Block& in = blocks[mod(r - step - 1)];
    const std::size_t segments = (in.count + segment - 1) / segment;
    // Two receives in flight, into alternating halves of the scratch; they complete in the
    // order they were posted (one peer, one slot).
    auto post = [&](std::size_t k) {
      const std::size_t c = std::min(segment, in.count - k * segment);
      scratch_buffer->recv(left, reduce_slot, (k % 2) * segment * element_size, c * element_size);
    };
    for (std::size_t k = 0; k < std::min<std::size_t>(2, segments); ++k) post(k);
    const std::size_t sends = send_segments(out, reduce_slot);
    for (std::size_t k = 0; k < segments; ++k) {
      scratch_buffer->waitRecv(timeout);
      const std::size_t c = std::min(segment, in.count - k * segment);
      unsigned char* target = data + (in.offset + k * segment) * element_size;
      reduce(target, target, scratch.data() + (k % 2) * segment * element_size, c);
      if (k + 2 < segments) post(k + 2);
    }
    // The block sent must not change under its sends: the next step reduces into another
    // block, but the allgather overwrites; finish them here.
    for (std::size_t i = 0; i < sends; ++i) data_buffer->waitSend(timeout);
  }
  for (int step = 0; step < n - 1; ++step) {
    const Block& out = blocks[mod(r + 1 - step)];
    const Block& in = blocks[mod(r - step)];
    std::size_t recvs = 0;
    for (std::size_t done = 0; done < in.count; done += segment) {
      const std::size_t c = std::min(segment, in.count - done);
      data_buffer->recv(left, gather_slot, (in.offset + done) * element_size, c * element_size);
      ++recvs;
    }
    const std::size_t sends = send_segments(out, gather_slot);
    for (std::size_t i = 0; i < recvs; ++i) data_buffer->waitRecv(timeout);
    for (std::size_t i = 0; i < sends; ++i) data_buffer->waitSend(timeout);
  }
}

}  // namespace hora::detail::gloo
