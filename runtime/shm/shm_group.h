// Collectives between the ranks of one host over a POSIX shared-memory segment.
//
// Every rank owns one region in each of the segment's two data halves. A collective runs in
// steps; each step writes into the next half (alternating), then meets the others at a barrier,
// then reads what it needs from any rank's region of that half. Alternating halves makes one
// barrier per step enough: a rank can only write a half again after every rank passed the next
// step's barrier, i.e. after everyone finished reading it. Large buffers go through in chunks
// of one region per rank and step, so the segment stays small (2 x size x region_bytes).
//
//   allreduce      small: everyone reduces everything (in rank order: identical results);
//                  large: every rank publishes its chunk but its own slice i, rank i
//                  reduces slice i from its input and the others' regions into its region,
//                  a second barrier, then everyone copies every slice to its output (two
//                  barriers per chunk; out of place, the input is only read)
//   allgather(v), broadcast (the root fills a whole half per step), reducescatter,
//   alltoall(v), barrier: one barrier per step.
//
// Barriers: one 32-bit arrival counter in the segment, also the futex word. A waiter spins
// briefly, yields, then sleeps on the futex in short slices; between slices it checks the
// launcher's abort (abort()), whether a peer marked the group broken, whether the ranks it is
// waiting for are still alive (PeerWatch), and its deadline (options.timeout without progress).
// The first failure breaks the group for this rank: later calls fail at once quoting it.
//
// Threading: the collectives (and close_abruptly()) run one at a time under op_mu_, whichever
// thread calls them (the Backend contract: one op at a time; the engine's transport: the thread
// that runs its cycle); a second caller waits, though its collective must still be the peers'
// next one. abort() may be called from any thread and never waits for a collective.
// Semantics match GlooBackend: kAverage reduces as kSum (the caller divides), the caller
// validates arguments and never calls with a group of one.
#pragma once

#include <hora/types.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "runtime/core/reduce.h"
#include "runtime/shm/layout.h"
#include "runtime/shm/peer_watch.h"
#include "runtime/shm/segment.h"

namespace hora::detail::shm {

struct ShmOptions {
  static constexpr std::size_t kDefaultRegionBytes = std::size_t{1} << 20;

  int local_rank = 0;
  int local_size = 1;
  int global_rank = 0;                       // written into the segment: peers name this rank by it
  std::string host;                          // for hora::Error::host()
  std::chrono::milliseconds timeout{30000};  // a wait without progress for this long fails
  std::size_t region_bytes = kDefaultRegionBytes;  // per rank and half; rounded to 64 bytes
  // A wait spins this long, then spins calling sched_yield() until yield_time (so a peer waiting
  // for this core gets it), then sleeps on the futex. Measured on a 2-core host loaded with
  // other work: longer pure spinning only delays peers that need the core, and a longer yield
  // phase took CPU from the computation while the async engine waited (docs/shm.md).
  std::chrono::nanoseconds spin_time = std::chrono::microseconds(2);
  std::chrono::nanoseconds yield_time = std::chrono::microseconds(50);
  // The launcher's abort while the group forms (the runtime's AbortState): the constructor's
  // waits check it and throw hora::AbortedError, unlinking the name (local rank 0 created it;
  // nobody else would remove it before every rank mapped it). Null: not checked.
  std::function<std::optional<std::string>()> aborted;
};

class ShmGroup {
 public:
  // Bytes of the segment for `size` ranks (every rank must compute the same).
  static std::size_t segment_bytes(int size, std::size_t region_bytes);

  // Local rank 0 creates the segment `name`; the others open it (waiting for it until
  // start_deadline). Every rank maps it and records its pid; the last one to map it unlinks
  // the name; all wait (until start_deadline) for every rank to have mapped it. Throws
  // hora::TimeoutError or hora::Error naming the step and the ranks missing; on failure the
  // name is unlinked too.
  ShmGroup(const std::string& name, ShmOptions options,
           std::chrono::steady_clock::time_point start_deadline);
  ~ShmGroup();

  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  int size() const { return size_; }
  int rank() const { return me_; }
  // Global rank of local rank i (as it wrote it into the segment).
  int global_rank_of(int i) const;

  // `group` names the public scope in messages ("local", "global").
  void allreduce(void* buffer, std::size_t count, DataType type, ReduceOp op, const char* group)
      HORA_EXCLUDES(op_mu_);
  // Out of place: sendbuf is only read (the in-place form above passes the same buffer twice).
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
                 const char* group) HORA_EXCLUDES(op_mu_);
  // In place with a reduction of the caller's over elements of element_size bytes (the
  // engine's bitwise AND); `name` names it in messages.
  void allreduce_custom(void* buffer, std::size_t count, std::size_t element_size, ReduceFn reduce,
                        const char* name, const char* group) HORA_EXCLUDES(op_mu_);
  void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                 const std::vector<std::size_t>& counts, DataType type, const char* group)
      HORA_EXCLUDES(op_mu_);
  void broadcast(void* buffer, std::size_t count, DataType type, int root, const char* group)
      HORA_EXCLUDES(op_mu_);
  // block_counts[i] elements of the reduction go to local rank i.
  void reducescatter(const void* sendbuf, void* recvbuf,
                     const std::vector<std::size_t>& block_counts, DataType type, ReduceOp op,
                     const char* group) HORA_EXCLUDES(op_mu_);
  void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
                const std::vector<std::size_t>& recv_splits, DataType type, const char* group)
      HORA_EXCLUDES(op_mu_);
  void barrier(const char* group) HORA_EXCLUDES(op_mu_);

  // The launcher's abort: waits in progress and later calls throw hora::AbortedError quoting
  // the reason. Thread-safe, never blocks.
  void abort(const std::string& reason) HORA_EXCLUDES(abort_mutex_);
  // What peers see when this process dies, for tests of failure handling: their waits fail
  // naming this rank. Later calls here fail.
  void close_abruptly() HORA_EXCLUDES(op_mu_);

 private:
  struct Op;

  void attach(std::chrono::steady_clock::time_point start_deadline) HORA_REQUIRES(op_mu_);
  // Throws hora::AbortedError naming `step` when options_.aborted reports the launcher's abort.
  void throw_if_aborted(const std::string& step) const;
  // `in` may equal `out` (in place); otherwise they do not overlap.
  void reduce_all(const Op& info, const char* in, char* out, std::size_t count,
                  std::size_t element_size, ReduceFn reduce, std::uint64_t signature)
      HORA_REQUIRES(op_mu_);
  // The next data half for a step.
  int next_half() HORA_REQUIRES(op_mu_) { return half_ ^= 1; }
  char* region(int rank, int half) const;
  std::size_t half_bytes() const { return region_bytes_ * static_cast<std::size_t>(size_); }
  // Enters a collective: fails at once if broken or aborted.
  void enter(const Op& op) HORA_REQUIRES(op_mu_);
  // The first step's barrier, with the signature check.
  void first_sync(const Op& op, int half, std::uint64_t signature) HORA_REQUIRES(op_mu_);
  void sync(const Op& op) HORA_REQUIRES(op_mu_);
  void wait(const Op& op, std::uint32_t barrier, std::uint32_t target) HORA_REQUIRES(op_mu_);
  void check_peers(const Op& op, std::uint32_t barrier) HORA_REQUIRES(op_mu_);
  [[noreturn]] void fail(const Op& op, int kind, const std::string& why, int peer)
      HORA_REQUIRES(op_mu_) HORA_EXCLUDES(abort_mutex_);
  [[noreturn]] void fail_broken(const Op& op) HORA_REQUIRES(op_mu_);

  // Set by the constructor, read-only afterwards (the segment's fields that change are atomics).
  ShmOptions options_;
  std::string who_;
  int me_ = 0;
  int size_ = 1;
  std::size_t region_bytes_ = 0;
  Segment segment_;
  Header* header_ = nullptr;
  RankState* ranks_ = nullptr;
  char* data_ = nullptr;
  std::vector<pid_t> pids_;

  // The collectives' state.
  Mutex op_mu_;
  PeerWatch peers_ HORA_GUARDED_BY(op_mu_);
  // allreduce's partial sums, one reduce block, on cache lines as the output's slices are (the
  // kernels' 32-byte stores must not split).
  struct alignas(kCacheLine) CacheLine {
    char bytes[kCacheLine];
  };
  std::vector<CacheLine> scratch_ HORA_GUARDED_BY(op_mu_);
  std::uint32_t barriers_ HORA_GUARDED_BY(op_mu_) = 0;  // barriers this rank entered
  int half_ HORA_GUARDED_BY(op_mu_) = 1;
  std::optional<std::string> broken_ HORA_GUARDED_BY(op_mu_);  // the first failure's message
  int broken_kind_ HORA_GUARDED_BY(op_mu_) = 0;

  // The launcher's abort (any thread). aborted_ is read without the mutex by the waits.
  std::atomic<bool> aborted_{false};
  mutable Mutex abort_mutex_;
  std::string abort_reason_ HORA_GUARDED_BY(abort_mutex_);
};

}  // namespace hora::detail::shm
