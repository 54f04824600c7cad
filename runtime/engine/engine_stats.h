// Counters of what the engine did, for tests, the benchmark and debugging. EngineCounters is
// written by the thread that runs the cycle (each counter before the ops it describes are
// completed, so a thread that synchronized an op sees the counts that include it) and read by any
// thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace hora::detail::engine {

struct EngineStats {
  std::uint64_t cycles = 0;             // bit-vector exchanges (Transport::allreduce_and calls)
  std::uint64_t full_negotiations = 0;  // Transport::allgather_bytes calls
  std::uint64_t cache_hits = 0;         // ops agreed through the bit vector alone
  std::uint64_t negotiated = 0;         // ops agreed through full negotiation
  std::uint64_t allreduce_calls = 0;    // data-plane allreduces run for allreduce ops
  std::uint64_t fused_batches = 0;      // of those, batches of 2 or more tensors
  std::uint64_t fused_tensors = 0;      // tensors that ran inside such batches
  std::uint64_t fused_in_place = 0;     // fused batches reduced where they lie (no fusion buffer)
  std::uint64_t largest_batch = 0;      // most tensors in one batch
  std::uint64_t mismatches = 0;         // ops failed because ranks disagreed
  std::uint64_t abandoned = 0;          // ops failed by the stall shutdown
};

class EngineCounters {
 public:
  std::atomic<std::uint64_t> cycles{0};
  std::atomic<std::uint64_t> full_negotiations{0};
  std::atomic<std::uint64_t> cache_hits{0};
  std::atomic<std::uint64_t> negotiated{0};
  std::atomic<std::uint64_t> allreduce_calls{0};
  std::atomic<std::uint64_t> fused_batches{0};
  std::atomic<std::uint64_t> fused_tensors{0};
  std::atomic<std::uint64_t> fused_in_place{0};
  std::atomic<std::uint64_t> largest_batch{0};
  std::atomic<std::uint64_t> mismatches{0};
  std::atomic<std::uint64_t> abandoned{0};

  EngineStats snapshot() const {
    EngineStats s;
    s.cycles = cycles.load();
    s.full_negotiations = full_negotiations.load();
    s.cache_hits = cache_hits.load();
    s.negotiated = negotiated.load();
    s.allreduce_calls = allreduce_calls.load();
    s.fused_batches = fused_batches.load();
    s.fused_tensors = fused_tensors.load();
    s.fused_in_place = fused_in_place.load();
    s.largest_batch = largest_batch.load();
    s.mismatches = mismatches.load();
    s.abandoned = abandoned.load();
    return s;
  }
};

}  // namespace hora::detail::engine
