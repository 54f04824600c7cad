// The seam between hora's async engine and a collective backend.
//
// A Transport is called only by the thread that runs the engine's current cycle, which holds the
// engine's cycle mutex: the engine thread, or a user thread that drives the engine while it waits
// for one of its ops (Engine::drive(); in a world of one, the submitting thread). The calls are
// therefore one sequence, never concurrent, so an implementation needs no locking of its own, but
// it must not tie anything to the calling thread (thread-local state, a thread id). It must run on
// a communicator dedicated to the engine (for Gloo: its own gloo::Context, or at least its own tag
// space), because the engine's calls interleave freely with whatever the user's threads run
// through the blocking API.
//
// Every call is collective: all ranks of the engine's world call the same methods in the same
// order (the engine guarantees this), and every call returns or throws on every rank. A call that
// cannot complete (peer died, deadline passed, job aborted) throws a hora::Error subclass
// (PeerFailure, TimeoutError, AbortedError, ConnectionError) whose message names the peer and the
// step; the engine treats any exception from a Transport as fatal for the communicator: it fails
// every op in flight with that error (same subclass) and stops.
//
// Two planes:
//  - control: allreduce_and (one small bit vector per cycle: the steady-state cost of a step) and
//    allgather_bytes (full negotiation of request lists; sizes differ per rank);
//  - data: the collectives that move tensors, on raw host buffers. Counts are in elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <hora/types.h>

namespace hora::detail::engine {

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // --- Control plane ---

  // In place: words[i] becomes the bitwise AND of words[i] over all ranks. Every rank passes the
  // same number of words (the engine sizes the vector from the shared cache capacity).
  virtual void allreduce_and(std::span<std::uint64_t> words) = 0;

  // Every rank contributes one byte blob (possibly empty, sizes differ per rank); returns all of
  // them indexed by rank (result[rank()] equals `mine`).
  virtual std::vector<std::vector<std::uint8_t>> allgather_bytes(
      std::span<const std::uint8_t> mine) = 0;

  // --- Data plane (host memory). sendbuf == recvbuf means in place where allowed. ---

  // Element-wise reduction of `count` elements over all ranks into recvbuf on every rank.
  // kAverage divides the sum by size() (integers: truncating division).
  virtual void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                         ReduceOp op) = 0;

  // Rank i contributes counts[i] elements (sendbuf holds counts[rank()]); recvbuf receives the
  // concatenation in rank order (sum of counts elements). counts.size() == size().
  virtual void allgatherv(const void* sendbuf, void* recvbuf, std::span<const std::size_t> counts,
                          DataType type) = 0;

  // root's `count` elements are copied into buffer on every rank.
  virtual void broadcast(void* buffer, std::size_t count, DataType type, int root) = 0;

  // send_splits[i] elements (consecutive in sendbuf) go to rank i; recv_splits[i] elements arrive
  // from rank i, stored consecutively in rank order. Both spans have size() entries. The engine
  // uses this call with int64 and all splits 1 to exchange the split sizes themselves.
  virtual void alltoallv(const void* sendbuf, std::span<const std::size_t> send_splits,
                         void* recvbuf, std::span<const std::size_t> recv_splits,
                         DataType type) = 0;

  // Reduces `count` elements over all ranks and leaves rank r its block: the first count % n
  // ranks get count / n + 1 elements, the others count / n, blocks in rank order (the same split
  // as hora::reducescatter_count). recvbuf holds this rank's block.
  virtual void reducescatter(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                             ReduceOp op) = 0;
};

// --- For the implementations of Transport (Gloo, shared memory). ---

// allreduce_and's reduction: out[i] = a[i] & b[i] over `count` 64-bit words (a ReduceFn).
inline void and_words(void* out, const void* a, const void* b, std::size_t count) {
  // Bytewise: the buffers a backend hands a ReduceFn need not be 8-byte aligned.
  auto* o = static_cast<unsigned char*>(out);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (std::size_t i = 0; i < count * sizeof(std::uint64_t); ++i) {
    o[i] = static_cast<unsigned char>(x[i] & y[i]);
  }
}

// allgather_bytes' result from the gathered concatenation: counts[r] bytes of rank r each.
inline std::vector<std::vector<std::uint8_t>> split_blobs(const std::vector<std::uint8_t>& all,
                                                          std::span<const std::size_t> counts) {
  std::vector<std::vector<std::uint8_t>> out(counts.size());
  std::size_t at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    out[r].assign(all.begin() + static_cast<std::ptrdiff_t>(at),
                  all.begin() + static_cast<std::ptrdiff_t>(at + counts[r]));
    at += counts[r];
  }
  return out;
}

}  // namespace hora::detail::engine
