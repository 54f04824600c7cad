#include "runtime/gloo/ring_reduce_scatter.h"

#include <gloo/types.h>

#include "runtime/core/copy.h"
#include "runtime/gloo/ring_allreduce.h"

namespace hora::detail::gloo {

void ring_reduce_scatter(MeshContext& context, const void* sendbuf, void* recvbuf,
                         const std::vector<std::size_t>& block_counts, std::size_t element_size,
                         ReduceFn reduce, std::uint32_t tag, std::chrono::milliseconds timeout,
                         RingBuffers& buffers) {
  const int r = context.rank;
  std::vector<RingBlock> blocks(block_counts.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < block_counts.size(); ++i) {
    blocks[i] = {total, block_counts[i]};
    total += block_counts[i];
  }
  // The work buffer accumulates partial sums block by block (sendbuf stays untouched).
  if (buffers.work.size() < total * element_size) buffers.work.resize(total * element_size);
  unsigned char* work = buffers.work.data();
  if (total > 0) copy_bytes(work, sendbuf, total * element_size);
  ring_reduce_steps(context, work, blocks, element_size, reduce,
                    ::gloo::Slot::build(kReduceScatterSlotPrefix, tag), timeout, buffers.scratch,
                    -1);
  if (block_counts[r] > 0) {
    copy_bytes(recvbuf, work + blocks[r].offset * element_size, block_counts[r] * element_size);
  }
}

}  // namespace hora::detail::gloo
