// Buffer arithmetic every backend shares: Horovod's split of `count` elements into one block per
// rank (reducescatter's blocks, the slices of the hierarchical allreduce), and whether two
// buffers overlap. Runtime-internal; <hora/hora.h>'s reducescatter_count is block_count with its
// arguments checked.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hora::detail {

// Rank r's block of `count` elements over n ranks (0 <= r < n): count / n, and one more for the
// first count % n ranks.
inline std::size_t block_count(std::size_t count, int r, int n) {
  const auto nn = static_cast<std::size_t>(n);
  const auto rr = static_cast<std::size_t>(r);
  return count / nn + (rr < count % nn ? 1 : 0);
}
// Where rank r's block starts, in elements: the sum of the blocks before it.
inline std::size_t block_offset(std::size_t count, int r, int n) {
  const auto nn = static_cast<std::size_t>(n);
  const auto rr = static_cast<std::size_t>(r);
  return rr * (count / nn) + std::min(rr, count % nn);
}
// Every rank's block_count, in rank order.
inline std::vector<std::size_t> block_counts(std::size_t count, int n) {
  std::vector<std::size_t> blocks(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) blocks[static_cast<std::size_t>(r)] = block_count(count, r, n);
  return blocks;
}

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte; an empty buffer overlaps nothing.
inline bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a);
  const auto pb = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace hora::detail
