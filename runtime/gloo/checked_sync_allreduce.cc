#include "runtime/gloo/checked_sync_allreduce.h"

#include <cstring>
#include <memory>

#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include "runtime/gloo/pair_swap.h"
#include "runtime/gloo/sync_allreduce.h"

namespace hora::detail::gloo {

namespace {

// Whether two partial checks agree with themselves and with each other: then the two sides ran
// the same op, and the partner's data has this rank's size and may be reduced.
bool sound_pair(const OpCheck& mine, const OpCheck& other) {
  return agrees(mine) && agrees(other) && other.lo.signature == mine.lo.signature;
}

}  // namespace

OpCheck checked_sync_allreduce(MeshContext& context, const OpCheck& mine, void* buffer,
                               std::size_t count, std::size_t element_size, ReduceFn reduce,
                               std::uint32_t tag, std::size_t max_bytes, SyncScratch& scratch) {
  constexpr std::size_t kHead = sizeof(OpCheck);
  const int n = context.size;
  const int r = context.rank;
  const std::size_t bytes = count * element_size;
  const std::size_t message = kHead + bytes;
  const std::size_t cap = kHead + max_bytes;
  const int base = static_cast<int>((tag & 0xFFFFFFu) * kSyncSlotsPerOp);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  int steps = 0;
  while ((1 << steps) < p) ++steps;
  const bool folded = r < 2 * extra && r % 2 == 1;
  const bool folds = r < 2 * extra && r % 2 == 0;
  auto pair = [&](int peer) -> ::gloo::transport::Pair& { return *context.getPair(peer); };

  if (scratch.send.size() < cap) scratch.send.resize(cap);
  if (n == 2 && bytes > max_bytes) {
    // The check alone, where step 0 of a smaller op would carry [check | data].
    if (scratch.inbox.size() < cap) scratch.inbox.resize(cap);
    const int peer = 1 - r;
    OpCheck merged = mine;
    std::memcpy(scratch.send.data(), &merged, kHead);
    auto in = pair(peer).createRecvBuffer(base + 2, scratch.inbox.data(), cap);
    auto out = pair(peer).createSendBuffer(base + 2, scratch.send.data(), kHead);
    out->send();
    in->waitRecv();
    out->waitSend();
    OpCheck other;
    std::memcpy(&other, scratch.inbox.data(), kHead);
    const bool sound = sound_pair(merged, other);
    merge_checks(&merged, &merged, &other, kHead);
    if (sound) {
      pair_swap(context, peer, static_cast<unsigned char*>(buffer), count, element_size, reduce,
                scratch.swap_inbox);
    }
    return merged;
  }
  const std::size_t receives_count = folded ? 1 : static_cast<std::size_t>(steps + (folds ? 1 : 0));
  if (scratch.inbox.size() < cap * receives_count) scratch.inbox.resize(cap * receives_count);
  unsigned char* send = scratch.send.data();
  unsigned char* data = send + kHead;
  OpCheck merged = mine;
  std::memcpy(send, &merged, kHead);
  if (bytes > 0) std::memcpy(data, buffer, bytes);
  auto inbox = [&](std::size_t i) { return scratch.inbox.data() + cap * i; };
  auto theirs = [&](std::size_t i) {
    OpCheck c;
    std::memcpy(&c, inbox(i), kHead);
    return c;
  };
  auto finish = [&]() {
    if (agrees(merged) && bytes > 0) std::memcpy(buffer, data, bytes);
    return merged;
  };

  if (folded) {
    // Hand [check | data] to r-1, get the merged result back.
    auto result = pair(r - 1).createRecvBuffer(base + 1, inbox(0), cap);
    auto out = pair(r - 1).createSendBuffer(base, send, message);
    out->send();
    out->waitSend();
    result->waitRecv();
    merged = theirs(0);
    if (agrees(merged) && bytes > 0) std::memcpy(data, inbox(0) + kHead, bytes);
    return finish();
  }

  const int vrank = r < 2 * extra ? r / 2 : r - extra;
  auto real = [&](int v) { return v < extra ? 2 * v : v + extra; };
  std::vector<std::unique_ptr<::gloo::transport::Buffer>> receives;
  if (folds) receives.push_back(pair(r + 1).createRecvBuffer(base, inbox(0), cap));
  for (int k = 0; k < steps; ++k) {
    receives.push_back(
        pair(real(vrank ^ (1 << k))).createRecvBuffer(base + 2 + k, inbox(receives.size()), cap));
  }

  // Merges message i into this rank's result; reduces its data (lower rank's first) if sound.
  auto absorb = [&](std::size_t i, bool mine_first) {
    const OpCheck other = theirs(i);
    const bool sound = sound_pair(merged, other);
    merge_checks(&merged, &merged, &other, kHead);
    std::memcpy(send, &merged, kHead);
    if (!sound || bytes == 0) return;
    const unsigned char* d = inbox(i) + kHead;
    if (mine_first) {
      reduce(data, data, d, count);
    } else {
      reduce(data, d, data, count);
    }
  };

  std::size_t next = 0;
  if (folds) {
    receives[next]->waitRecv();
    absorb(next, true);  // r-1 < r: this rank's data first
    ++next;
  }
  for (int k = 0; k < steps; ++k, ++next) {
    const int partner = vrank ^ (1 << k);
    auto out = pair(real(partner)).createSendBuffer(base + 2 + k, send, message);
    out->send();
    receives[next]->waitRecv();
    // The send reads `send`: finish it before merging into it.
    out->waitSend();
    absorb(next, vrank < partner);
  }
  if (folds) {
    auto out = pair(r + 1).createSendBuffer(base + 1, send, message);
    out->send();
    out->waitSend();
  }
  return finish();
}

}  // namespace hora::detail::gloo
