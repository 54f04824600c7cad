// The async engine: one background thread per process that agrees with the other ranks which
// named ops are ready everywhere, and runs them in one order that is the same on every rank.
//
// Protocol, once per cycle (every cycle_time; all ranks take part in every cycle):
//  1. Drain the ops submitted since the last cycle. Each is looked up in the replicated
//     ResponseCache: a hit marks the op's cache bit; a miss (or a changed signature) queues the
//     request for announcement (a changed signature also marks the bit invalid).
//  2. Bit-vector exchange: Transport::allreduce_and over
//       [flags][hit bits][inverted invalid bits], each half ResponseCache::bit_limit() bits
//     flags (AND): "nothing to announce", "not shutting down", "idle". Inverted bits under AND
//     compute an OR, so one call yields: hits common to all ranks, bits any rank invalidated,
//     whether any rank has something to announce, and whether any rank is shutting down.
//  3. If a rank shuts down, every rank stops here (in-flight ops fail with hora::Error).
//     Invalid bits are erased from every cache; waiting hits on them are re-announced.
//     Common hits become agreed Responses in bit order (no names travel: the cache has them).
//  4. Only if some rank has something to announce: full negotiation. Each rank encodes its
//     unannounced requests (and stall-shutdown proposals) in a NegotiationMessage;
//     Transport::allgather_bytes hands everyone every message; all ranks feed them, rank 0's
//     first, into the replicated MessageTable. Names every rank has now submitted become
//     Responses (or mismatch errors) in the order they completed.
//  5. The Executor runs the cycle's Responses in that order (fusing allreduces), then every
//     successful Response is put into the cache in the same order on every rank.
// In steady state (the same names every step) step 4 never happens: a step costs the bit-vector
// allreduces of the cycles it spans.
//
// Threading: submit(), stats() and shutdown() may be called from any thread; everything else
// (cache, table, transport, timeline, executor) belongs to the thread that runs the current
// cycle, which holds cycle_mu_: the engine thread at its ticks, or a thread that waits for one of
// its ops without a deadline (hora::synchronize): that thread runs the cycles itself until its op
// completes (drive()), which saves the two cross-thread wake-ups of a hand-off per step. Cycles
// stay one sequence per rank, whichever thread runs each, so every rank still takes part in
// every cycle. A completed op is
// removed from the in-flight names before its Handle::State completes, so a caller may reuse the
// name as soon as synchronize() returns or inside the callback.
//
// Lifetime: the Transport must outlive the Engine. After shutdown() (or a transport failure, or a
// peer's shutdown) the engine is stopped for good: later submissions complete at once with the
// reason.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <hora/async.h>

#include "runtime/engine/engine_options.h"
#include "runtime/engine/engine_stats.h"
#include "runtime/engine/executor.h"
#include "runtime/engine/message_table.h"
#include "runtime/engine/op_state.h"
#include "runtime/engine/response_cache.h"
#include "runtime/engine/stall_inspector.h"
#include "runtime/engine/timeline.h"
#include "runtime/engine/transport.h"

namespace hora::detail::engine {

class Engine {
 public:
  using Clock = std::chrono::steady_clock;
  using WarningSink = StallInspector::Sink;

  // warnings receives the stall check's blocks (default: the runtime logger, warning level).
  Engine(Transport& transport, EngineOptions options, WarningSink warnings = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Opens the timeline (rank 0, when configured; throws hora::Error if it cannot be created) and
  // starts the background thread. Every rank must start its engine: the first cycle waits for all.
  void start();

  // Stops the engine on every rank: the flag travels in the next cycle, after which all engines
  // stop and fail their in-flight ops with "hora was shut down before ... completed". Waits for
  // this rank's thread (bounded by the transport's own timeout when peers are gone). Idempotent;
  // also called by the destructor.
  void shutdown();

  // Validates and queues an op (state->request describes it; buffers filled in). Throws
  // hora::UsageError for invalid arguments or a name already in flight on this rank.
  Handle submit(std::shared_ptr<Handle::State> state);

  EngineStats stats() const { return counters_.snapshot(); }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const EngineOptions& options() const { return options_; }

 private:
  struct Local {
    std::shared_ptr<Handle::State> state;
    bool hit = false;  // waiting on cache bit `bit`
    std::size_t bit = 0;
  };

  void loop();
  // Runs one cycle on this thread (which holds cycle_mu_); on its end (a shutdown agreed by all
  // ranks, or a failure) stops the engine. False when the engine has stopped.
  bool run_cycle();
  bool cycle();  // false: stop
  // Whether the engine thread should run a cycle now (mu_ held): a tick came, or a thread asks.
  bool cycle_due(Clock::time_point now) const;
  // A thread waits for `waited` without a deadline: runs cycles here until it completes.
  void drive(const Handle::State* waited);
  void classify(const std::string& name);
  void announce_later(const std::string& name);
  void negotiate(std::vector<ReadyOp>& ready);
  void finish(ReadyOp& op, std::exception_ptr error);
  // Drops the op from in_flight_ and completes its handle (any thread).
  void release(ReadyOp& op, std::exception_ptr error);
  // A thread waits for one of this rank's ops: start the next cycle now.
  // A thread waits for `waited` (an in-flight op): cycles run back to back, without waiting for
  // a tick, until that op completes.
  void hurry(const Handle::State* waited);
  // A world of one: there is nobody to negotiate with, so the submitting thread runs the op at
  // once (a local copy) and the engine thread only waits for shutdown.
  void run_alone(const std::shared_ptr<Handle::State>& state);
  void stop(std::exception_ptr cause, const std::string& why);
  void validate(const Handle::State& state) const;

  Transport& transport_;
  const EngineOptions options_;
  const int rank_;
  const int size_;
  EngineCounters counters_;

  // Shared with submitting threads, guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::unordered_map<std::string, std::shared_ptr<Handle::State>> in_flight_;
  std::vector<std::shared_ptr<Handle::State>> incoming_;
  bool shutdown_requested_ = false;
  bool stopped_ = false;
  std::exception_ptr stop_reason_;  // what later submissions fail with
  std::string stop_why_;
  std::thread thread_;
  bool hurry_ = false;  // a thread waits for an op: the next cycle starts without a tick
  // The in-flight ops some thread waits for. While one is left, cycles run back to back: a
  // one-shot hurry could be spent on a cycle that completed nothing (the peers were one cycle
  // behind), and the engine then slept a whole tick with its caller waiting (100 ms steps at
  // HORA_CYCLE_TIME_MS=100).
  std::set<const Handle::State*> waited_;
  // When the engine thread's next cycle is due (set by every cycle, whichever thread ran it).
  Clock::time_point next_tick_{};
  bool backoff_ = false;  // the next tick is a stretched idle one
  // What submitted ops' on_wait and drive reach the engine through; `engine` is cleared when it
  // stops (a Handle may outlive its engine), once no thread drives it any more.
  struct Alarm {
    std::mutex mu;
    std::condition_variable idle;
    Engine* engine = nullptr;
    int drivers = 0;  // threads inside drive()
  };
  std::shared_ptr<Alarm> alarm_ = std::make_shared<Alarm>();
  // A world of one: serializes run_alone() (recursive: a completion callback may submit).
  std::recursive_mutex alone_mu_;
  // Held by the thread that runs a cycle; everything below belongs to it.
  std::mutex cycle_mu_;

  ResponseCache cache_;
  MessageTable table_;
  Timeline timeline_;
  StallInspector stall_;
  Executor executor_;
  std::unordered_map<std::string, Local> local_;  // this rank's ops not yet completed
  std::map<std::size_t, std::string> hits_;       // cache bit -> name waiting on it
  std::vector<std::string> to_announce_;          // in submission order
  std::vector<std::string> abandon_;              // stall-shutdown proposals for the next round
  std::vector<std::uint64_t> invalid_;            // this cycle's invalid bits (not inverted)
  std::string who_;                               // "rank R on HOST" for messages
  int idle_streak_ = 0;
};

}  // namespace hora::detail::engine
