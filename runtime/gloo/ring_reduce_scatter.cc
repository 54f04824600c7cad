#include "runtime/gloo/ring_reduce_scatter.h"

#include <algorithm>
#include <cstring>

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "runtime/core/copy.h"

namespace hora::detail::gloo {

void ring_reduce_scatter(MeshContext& context, const void* sendbuf, void* recvbuf,
                         const std::vector<std::size_t>& block_counts, std::size_t element_size,
                         ReduceFn reduce, std::uint32_t tag, std::chrono::milliseconds timeout) {
  const int n = context.size;
  const int r = context.rank;
  std::vector<std::size_t> offsets(block_counts.size(), 0);
  std::size_t total = 0;
  std::size_t largest = 0;
  for (std::size_t i = 0; i < block_counts.size(); ++i) {
    offsets[i] = total;
    total += block_counts[i];
    largest = std::max(largest, block_counts[i]);
  }

  // work accumulates partial sums block by block; incoming blocks land in scratch first.
  std::vector<unsigned char> work(total * element_size);
  std::vector<unsigned char> scratch(std::max<std::size_t>(largest * element_size, 1));
  if (!work.empty()) copy_bytes(work.data(), sendbuf, work.size());
  auto work_buffer = context.createUnboundBuffer(work.data(), work.size());
  auto scratch_buffer = context.createUnboundBuffer(scratch.data(), scratch.size());
  const std::uint64_t slot = ::gloo::Slot::build(kReduceScatterSlotPrefix, tag);

  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  for (int step = 0; step < n - 1; ++step) {
    const int send_block = ((r - step - 1) % n + n) % n;
    const int recv_block = ((r - step - 2) % n + n) % n;
    work_buffer->send(right, slot, offsets[send_block] * element_size,
                      block_counts[send_block] * element_size);
    scratch_buffer->recv(left, slot, 0, block_counts[recv_block] * element_size);
    scratch_buffer->waitRecv(timeout);
    unsigned char* target = work.data() + offsets[recv_block] * element_size;
    reduce(target, target, scratch.data(), block_counts[recv_block]);
    // A block must not change while its send is in flight: finish the send before the next
    // step reduces into the work buffer again.
    work_buffer->waitSend(timeout);
  }
  if (block_counts[r] > 0) {
    copy_bytes(recvbuf, work.data() + offsets[r] * element_size, block_counts[r] * element_size);
  }
}

}  // namespace hora::detail::gloo
