// alltoall's cross-rank check of the splits, shared by the shared-memory group
// (runtime/shm/shm_group.cc) and the Gloo backend's consistency check (runtime/gloo/op_check.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/fnv.h"

namespace hora::detail {

// This rank's share of a sum over all ranks that is 0 (mod 2^64) exactly when every rank's
// send_splits[j] equals rank j's recv_splits[i] (up to a 2^-64 chance): each split is hashed with
// its sender and receiver, added by the sender and subtracted by the receiver.
inline std::uint64_t splits_balance(int me, const std::vector<std::size_t>& send_splits,
                                    const std::vector<std::size_t>& recv_splits) {
  auto term = [](std::size_t from, std::size_t to, std::size_t count) {
    return Fnv1a64().word(from).word(to).word(count).value();
  };
  std::uint64_t balance = 0;
  const auto r = static_cast<std::size_t>(me);
  for (std::size_t j = 0; j < send_splits.size(); ++j) balance += term(r, j, send_splits[j]);
  for (std::size_t i = 0; i < recv_splits.size(); ++i) balance -= term(i, r, recv_splits[i]);
  return balance;
}

}  // namespace hora::detail
