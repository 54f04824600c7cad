// Runs one cycle's agreed ops on the Transport, in the agreed order, and completes them.
//
// Fusion: walking the list in order, an allreduce starts a batch and pulls in the later
// allreduces of the list with the same data type, reduce op and device while the batch stays
// within fusion_threshold bytes. A batch of one runs directly on the user's buffers; a larger
// batch is packed into the fusion buffer (owned here, grown on demand up to the threshold),
// reduced with one Transport::allreduce, and unpacked. Every rank builds the same batches because
// the list and the thresholds are the same everywhere (HORA_FUSION_THRESHOLD must agree).
// An allreduce of at least kDirectAllreduceBytes is never fused: it runs alone on the user's
// buffers, since its two copies through the fusion buffer would cost more than the one call it
// saves (measured: four 16.8 MB gradients a step paid about 20 ms of copies on a 2-core VM).
//
// Threading: called only by the thread that runs the engine's cycle (Engine::cycle_mu_ held;
// the engine guards its Executor with it).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/engine/engine_options.h"
#include "runtime/engine/engine_stats.h"
#include "runtime/engine/op_state.h"
#include "runtime/engine/response.h"
#include "runtime/engine/timeline.h"
#include "runtime/engine/transport.h"

namespace hora::detail::engine {

inline constexpr std::size_t kDirectAllreduceBytes = std::size_t{4} << 20;

// One agreed op as this rank runs it.
struct ReadyOp {
  Response response;
  std::shared_ptr<Handle::State> state;  // this rank's submission
  std::chrono::steady_clock::time_point agreed;
};

class Executor {
 public:
  using Clock = std::chrono::steady_clock;
  // Called once per op with its outcome (nullptr: success); the engine forgets the op, then
  // completes its Handle::State.
  using Finish = std::function<void(ReadyOp& op, std::exception_ptr error)>;

  Executor(Transport& transport, const EngineOptions& options, Timeline& timeline,
           EngineCounters& counters);

  // Runs every op of `ops`. Failed responses (mismatch, stall) complete with their error without
  // touching the transport. A transport exception completes the ops of the failing batch with
  // it (with context) and propagates: the caller must stop the engine.
  void run(std::vector<ReadyOp>& ops, const Finish& finish);

 private:
  void run_allreduce_batch(const std::vector<ReadyOp*>& batch, const Finish& finish);
  // The batch's send and receive spans when each tensor starts where the previous one ends in
  // both (in batch order), and the spans are the same or do not overlap; nullopt otherwise.
  static std::optional<std::pair<const void*, void*>> adjacent_span(
      const std::vector<ReadyOp*>& batch, std::size_t elem);
  void run_one(ReadyOp& op, const Finish& finish);

  Transport& transport_;
  std::size_t fusion_threshold_;
  Timeline& timeline_;
  EngineCounters& counters_;
  std::uint64_t batch_id_ = 0;
  std::vector<std::uint8_t> fusion_buffer_;
};

}  // namespace hora::detail::engine
