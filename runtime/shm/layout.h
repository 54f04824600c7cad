// The layout of a local group's shared-memory segment (ShmGroup):
//
//   Header | RankState[size] | data: 2 halves x size regions x region_bytes
//
// Every field that more than one process writes is a lock-free std::atomic (address-free, so
// valid across processes). Fields that different ranks write often sit on cache lines of their
// own. The creator (local rank 0) fills the header and stores kMagic last; the others read
// nothing else until they see it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace hora::detail::shm {

inline constexpr std::uint64_t kMagic = 0x686f72612d73686dULL;  // "hora-shm"
inline constexpr std::size_t kCacheLine = 64;

// Why the group broke for everyone (Header::broken_kind).
enum class Broken : std::uint32_t {
  kNone = 0,
  kDied = 1,    // broken_rank's process exited while the others waited for it
  kClosed = 2,  // broken_rank closed its connections abruptly (Runtime::close_abruptly)
};

struct alignas(kCacheLine) Header {
  std::atomic<std::uint64_t> magic;
  std::uint32_t size;
  std::uint32_t reserved;
  std::uint64_t region_bytes;
  std::uint64_t data_offset;
  // Ranks that mapped the segment; the one that brings it to `size` unlinks the name.
  alignas(kCacheLine) std::atomic<std::uint32_t> attached;
  // Set once, by the first rank that sees a peer die or that closes abruptly; every waiter
  // checks it, so all of them fail naming the same rank.
  alignas(kCacheLine) std::atomic<std::uint32_t> broken_kind;
  std::atomic<std::int32_t> broken_rank;  // local rank; written before broken_kind
  // Barrier arrivals (the futex word): barrier b (1, 2, ...) is complete when this reaches
  // b * size (mod 2^32).
  alignas(kCacheLine) std::atomic<std::uint32_t> arrivals;
  // How many ranks sleep (or are about to) on `arrivals`: arrivers skip the wake syscall at 0.
  alignas(kCacheLine) std::atomic<std::uint32_t> sleepers;
};

struct alignas(kCacheLine) RankState {
  std::atomic<std::int32_t> pid;
  std::atomic<std::int32_t> global_rank;
  std::atomic<std::uint32_t> arrived;  // the last barrier this rank arrived at
  std::uint32_t reserved;
  // Per data half: the signature of the collective this rank started there (checked by every
  // rank after the first barrier), and a value the collective shares (alltoall: its largest
  // message). Written before the barrier, read after it.
  std::atomic<std::uint64_t> signature[2];
  std::atomic<std::uint64_t> shared_value[2];
  // alltoall: this rank's splits balance (common/fnv.h's splits_balance); the ranks' balances
  // add up to 0 (mod 2^64) when every send_splits[j] matches rank j's recv_splits[i].
  std::atomic<std::uint64_t> splits_balance[2];
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::int32_t>::is_always_lock_free);

}  // namespace hora::detail::shm
