// Allreduce of a small buffer on a context whose pairs are in Gloo's sync mode (sync_policy.h).
//
// Sync pairs only carry Gloo's bound buffers (createSendBuffer/createRecvBuffer; unbound ones
// enforce async mode), so this is hora's own algorithm on them: recursive doubling. With p the
// largest power of two <= n and e = n - p, ranks 0..2e-1 first fold in pairs (odd rank r sends
// to r-1 and waits for the result), the p remaining ranks exchange whole buffers with the rank
// whose virtual rank differs in bit k, for k = 0..log2(p)-1, reducing each time, and the folded
// ranks get the result. log2(p) (+2) one-way latencies instead of the ring's 2(n-1). Each step
// reduces the lower virtual rank's buffer first, so both partners compute the same bits and
// every rank ends with the same result.
//
// Every step has its own slot (the op's tag, then the step) and its own inbox, all registered
// before the first send, so nothing a peer sends can find its buffer missing, and no
// notification round is needed before an inbox is reused. Every wait is bounded by the pairs'
// timeout (the job's HORA_TIMEOUT_SECONDS: SO_RCVTIMEO, or the busy-poll loop's clock); Gloo's
// errors (gloo::IoException naming the peer's address, gloo::EnforceNotMet for a size the peer
// disagrees about) reach GlooBackend::fail like the async contexts' ones.
//
// Header-only: runtime/meson.build lists the backend's sources, and this branch may not touch it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include "runtime/core/reduce.h"
#include "runtime/gloo/mesh_context.h"
#include "runtime/gloo/pair_swap.h"

namespace hora::detail::gloo {

// Slots per operation: the fold, the result, and one per doubling step (2^62 ranks at most); a
// group of 2 has one step (larger buffers go through pair_swap.h, on no slot).
inline constexpr int kSyncSlotsPerOp = 64;

// In place on `buffer` (count elements of element_size bytes). tag: the op's number on this
// context (every rank calls in the same order); slots wrap after 2^24 ops, long after the
// earlier ops' buffers are gone.
// swap_inbox: pair_swap's, kept between calls.
inline void sync_allreduce(MeshContext& context, void* buffer, std::size_t count,
                           std::size_t element_size, ReduceFn reduce, std::uint32_t tag,
                           std::vector<unsigned char>& swap_inbox) {
  const int n = context.size;
  const int r = context.rank;
  const std::size_t bytes = count * element_size;
  if (bytes == 0) return;
  auto* data = static_cast<unsigned char*>(buffer);
  const int base = static_cast<int>((tag & 0xFFFFFFu) * kSyncSlotsPerOp);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  auto pair = [&](int peer) -> ::gloo::transport::Pair& { return *context.getPair(peer); };

  if (n == 2 && bytes > kPairSwapMinBytes) {
    // One swap on the pair's connection (pair_swap.h).
    pair_swap(context, 1 - r, data, count, element_size, reduce, swap_inbox);
    return;
  }
  if (r < 2 * extra && r % 2 == 1) {
    // Folded: hand the data to r-1, get the result back.
    auto result = pair(r - 1).createRecvBuffer(base + 1, data, bytes);
    auto send = pair(r - 1).createSendBuffer(base, data, bytes);
    send->send();
    send->waitSend();
    result->waitRecv();
    return;
  }

  const int vrank = r < 2 * extra ? r / 2 : r - extra;
  auto real = [&](int v) { return v < extra ? 2 * v : v + extra; };
  int steps = 0;
  while ((1 << steps) < p) ++steps;
  const bool folds = r < 2 * extra;
  std::vector<unsigned char> inbox(bytes * static_cast<std::size_t>(steps + (folds ? 1 : 0)));
  std::vector<std::unique_ptr<::gloo::transport::Buffer>> receives;
  if (folds) receives.push_back(pair(r + 1).createRecvBuffer(base, inbox.data(), bytes));
  for (int k = 0; k < steps; ++k) {
    const std::size_t at = bytes * static_cast<std::size_t>(receives.size());
    receives.push_back(
        pair(real(vrank ^ (1 << k))).createRecvBuffer(base + 2 + k, inbox.data() + at, bytes));
  }

  std::size_t next = 0;
  if (folds) {
    receives[next]->waitRecv();
    reduce(data, data, inbox.data(), count);  // r-1 < r: this rank's data first
    ++next;
  }
  for (int k = 0; k < steps; ++k, ++next) {
    const int partner = vrank ^ (1 << k);
    auto send = pair(real(partner)).createSendBuffer(base + 2 + k, data, bytes);
    send->send();
    receives[next]->waitRecv();
    // The send reads `data`: finish it before reducing into it.
    send->waitSend();
    const unsigned char* theirs = inbox.data() + bytes * next;
    if (vrank < partner) {
      reduce(data, data, theirs, count);
    } else {
      reduce(data, theirs, data, count);
    }
  }
  if (folds) {
    auto send = pair(r + 1).createSendBuffer(base + 1, data, bytes);
    send->send();
    send->waitSend();
  }
}

}  // namespace hora::detail::gloo
