#include "runtime/gloo/pair_swap.h"

#include <algorithm>
#include <memory>

#include <gloo/transport/buffer.h>

namespace hora::detail::gloo {

void pair_swap(::gloo::transport::Pair& pair, bool mine_first, unsigned char* data,
               std::size_t count, std::size_t element_size, ReduceFn reduce, int first_slot,
               std::vector<unsigned char>& scratch) {
  const std::size_t per_chunk = std::max<std::size_t>(1, kPairSwapChunkBytes / element_size);
  const std::size_t chunk_bytes = per_chunk * element_size;
  const std::size_t chunks = (count + per_chunk - 1) / per_chunk;
  if (chunks == 0) return;
  if (scratch.size() < 2 * chunk_bytes) scratch.resize(2 * chunk_bytes);
  auto elements = [&](std::size_t c) { return std::min(per_chunk, count - c * per_chunk); };
  auto inbox = [&](std::size_t c) { return scratch.data() + (c & 1) * chunk_bytes; };
  auto slot = [&](std::size_t c) { return first_slot + static_cast<int>(c & 1); };
  auto receive = [&](std::size_t c) {
    return pair.createRecvBuffer(slot(c), inbox(c), elements(c) * element_size);
  };

  std::unique_ptr<::gloo::transport::Buffer> next = receive(0);
  for (std::size_t c = 0; c < chunks; ++c) {
    // Chunk c - 1's receive (the same slot and inbox as c + 1) is gone, its data reduced.
    std::unique_ptr<::gloo::transport::Buffer> current = std::move(next);
    if (c + 1 < chunks) next = receive(c + 1);
    unsigned char* mine = data + c * chunk_bytes;
    auto out = pair.createSendBuffer(slot(c), mine, elements(c) * element_size);
    out->send();
    current->waitRecv();
    out->waitSend();  // the send reads `mine`: finish it before reducing into it
    if (mine_first) {
      reduce(mine, mine, inbox(c), elements(c));
    } else {
      reduce(mine, inbox(c), mine, elements(c));
    }
  }
}

}  // namespace hora::detail::gloo
