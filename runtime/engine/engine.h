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
// Join (hora::join): a join request marks its rank joined in the MessageTable until every rank
// has joined. Meanwhile no name waits for a joined rank, every op goes through full negotiation
// (a joined rank sets no cache bits), and a joined rank runs the others' allreduces with zeros
// of the agreed size; the join's Response names the last rank to join.
//
// Threading: submit(), stats() and shutdown() may be called from any thread; everything else
// (cache, table, transport, timeline, executor) belongs to the thread that holds cycle_mu_, which
// is the thread that runs the current cycle: the engine thread at its ticks, or a thread that
// waits for one of its ops without a deadline (hora::synchronize): that thread runs the cycles
// itself until its op completes (drive()), which saves the two cross-thread wake-ups of a
// hand-off per step. Cycles stay one sequence per rank, whichever thread runs each, so every rank
// still takes part in every cycle. In a world of one there are no cycles: the submitting thread
// runs its op under cycle_mu_ (run_alone()). The members below say which mutex guards them
// (clang checks it: common/thread_annotations.h); the order is cycle_mu_, then mu_, then a
// Handle::State's own. A completed op is removed from the in-flight names before its
// Handle::State completes, so a caller may reuse the name as soon as synchronize() returns or
// inside the callback.
//
// Lifetime: the Transport must outlive the Engine. After shutdown() (or a transport failure, or a
// peer's shutdown) the engine is stopped for good: later submissions complete at once with the
// reason.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <hora/async.h>

#include "common/thread_annotations.h"
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
  void start() HORA_EXCLUDES(cycle_mu_, mu_);

  // Stops the engine on every rank: the flag travels in the next cycle, after which all engines
  // stop and fail their in-flight ops with "hora was shut down before ... completed". Waits for
  // this rank's thread (bounded by the transport's own timeout when peers are gone). Idempotent;
  // also called by the destructor.
  void shutdown() HORA_EXCLUDES(mu_);

  // Validates and queues an op (state->request describes it; buffers filled in). Throws
  // hora::UsageError for invalid arguments or a name already in flight on this rank.
  Handle submit(std::shared_ptr<Handle::State> state) HORA_EXCLUDES(mu_);

  // hora::start_timeline / stop_timeline: rank 0 opens `path` (a Chrome trace of the ops from
  // now on; another path closes the current file first, the same path while it is open only
  // changes mark_cycles, as in Horovod) or closes the current file, which is then valid JSON. On
  // other ranks both do nothing (rank 0 writes the timeline). Waits for the cycle in progress;
  // any thread, a completion callback included. start throws hora::Error naming the path if it
  // cannot be created (the previous file is closed then).
  void start_timeline(const std::string& path, bool mark_cycles) HORA_EXCLUDES(mu_);
  void stop_timeline() HORA_EXCLUDES(mu_);

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

  void loop() HORA_EXCLUDES(cycle_mu_, mu_);
  // Runs one cycle on this thread (which holds cycle_mu_); on its end (a shutdown agreed by all
  // ranks, or a failure) stops the engine. False when the engine has stopped.
  bool run_cycle() HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);
  bool cycle() HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);  // false: stop (end_why_ says why)
  // The steps of cycle(), numbered as in the protocol above. 1: takes the ops submitted since
  // the last cycle and classifies them; returns whether this rank asked to stop.
  bool take_submissions(Clock::time_point cycle_start, std::size_t bit_limit)
      HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);
  // 2: the bit-vector AND across ranks (flags, common hits, invalid bits; in the first cycle
  // also the values every rank must share).
  std::vector<std::uint64_t> exchange_bits(bool stopping) HORA_REQUIRES(cycle_mu_);
  // 3: a bit invalid on some rank leaves every rank's cache; returns whether there was one.
  bool drop_invalid_bits(const std::vector<std::uint64_t>& words, std::size_t w,
                         std::size_t bit_limit) HORA_REQUIRES(cycle_mu_);
  // 3: the hits every rank has, ready to run in bit order.
  std::vector<ReadyOp> common_hits(const std::vector<std::uint64_t>& words, std::size_t w,
                                   Clock::time_point agreed) HORA_REQUIRES(cycle_mu_);
  // 5: runs the cycle's responses and caches what ran.
  void run_ready(std::vector<ReadyOp>& ready, bool full, Clock::time_point cycle_start)
      HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);
  // Whether the engine thread should run a cycle now: a tick came, or a thread asks.
  bool cycle_due(Clock::time_point now) const HORA_REQUIRES(mu_);
  // A thread waits for `waited` without a deadline: runs cycles here until it completes.
  void drive(const Handle::State* waited) HORA_EXCLUDES(mu_);
  void classify(const std::string& name) HORA_REQUIRES(cycle_mu_);
  void announce_later(const std::string& name) HORA_REQUIRES(cycle_mu_);
  void negotiate(std::vector<ReadyOp>& ready) HORA_REQUIRES(cycle_mu_);
  void finish(ReadyOp& op, std::exception_ptr error) HORA_REQUIRES(cycle_mu_) HORA_EXCLUDES(mu_);
  // Drops the op from in_flight_ and completes its handle (any thread).
  void release(ReadyOp& op, std::exception_ptr error) HORA_EXCLUDES(mu_);
  // A thread waits for `waited` (an in-flight op): cycles run back to back, without waiting for
  // a tick, until that op completes.
  void hurry(const Handle::State* waited) HORA_EXCLUDES(mu_);
  // A world of one: there is nobody to negotiate with, so the submitting thread runs the op at
  // once (a local copy) under cycle_mu_, and the engine thread only waits for shutdown.
  void run_alone(const std::shared_ptr<Handle::State>& state) HORA_EXCLUDES(mu_);
  void stop(std::exception_ptr cause, const std::string& why) HORA_REQUIRES(cycle_mu_)
      HORA_EXCLUDES(mu_);
  void validate(const Handle::State& state) const;
  // The executor's completion callbacks run inside executor_.run(), which this thread called
  // with cycle_mu_ held; the analysis cannot follow a std::function, so they say it with this.
  void cycle_mu_held() const HORA_ASSERT_HELD(cycle_mu_) {}

  Transport& transport_;
  const EngineOptions options_;
  const int rank_;
  const int size_;
  EngineCounters counters_;

  const std::string who_;  // "rank R on HOST" for messages

  // Held by the thread that runs a cycle (or, in a world of one, an op: run_alone()). Recursive:
  // in a world of one a completion callback may submit, and its op runs at once on the same
  // thread. A cycle's callbacks cannot start a cycle (tl_cycling).
  RecursiveMutex cycle_mu_;
  // Shared with submitting threads.
  mutable Mutex mu_;
  CondVar wake_;  // the engine thread's wait for its next cycle (or, alone, for shutdown)
  std::unordered_map<std::string, std::shared_ptr<Handle::State>> in_flight_ HORA_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Handle::State>> incoming_ HORA_GUARDED_BY(mu_);
  bool shutdown_requested_ HORA_GUARDED_BY(mu_) = false;
  bool stopped_ HORA_GUARDED_BY(mu_) = false;
  std::exception_ptr stop_reason_ HORA_GUARDED_BY(mu_);  // what later submissions fail with
  std::string stop_why_ HORA_GUARDED_BY(mu_);
  std::thread thread_ HORA_GUARDED_BY(mu_);
  bool started_ HORA_GUARDED_BY(mu_) = false;  // start() started thread_ (it may be joined now)
  CondVar stopped_cv_;                         // stopped_ became true
  // A thread waits for an op: the next cycle starts without a tick.
  bool hurry_ HORA_GUARDED_BY(mu_) = false;
  // The in-flight ops some thread waits for. While one is left, cycles run back to back: a
  // one-shot hurry could be spent on a cycle that completed nothing (the peers were one cycle
  // behind), and the engine then slept a whole tick with its caller waiting (100 ms steps at
  // HORA_CYCLE_TIME_MS=100).
  std::set<const Handle::State*> waited_ HORA_GUARDED_BY(mu_);
  // When the engine thread's next cycle is due (set by every cycle, whichever thread ran it).
  Clock::time_point next_tick_ HORA_GUARDED_BY(mu_) = {};
  bool backoff_ HORA_GUARDED_BY(mu_) = false;  // the next tick is a stretched idle one
  // What submitted ops' on_wait and drive reach the engine through; `engine` is cleared when it
  // stops (a Handle may outlive its engine), once no thread drives it any more.
  struct Alarm {
    Mutex mu;
    CondVar idle;
    Engine* engine HORA_GUARDED_BY(mu) = nullptr;
    int drivers HORA_GUARDED_BY(mu) = 0;  // threads inside drive()
  };
  std::shared_ptr<Alarm> alarm_ = std::make_shared<Alarm>();

  // The cycles' state.
  ResponseCache cache_ HORA_GUARDED_BY(cycle_mu_);
  MessageTable table_ HORA_GUARDED_BY(cycle_mu_);
  Timeline timeline_ HORA_GUARDED_BY(cycle_mu_);
  StallInspector stall_ HORA_GUARDED_BY(cycle_mu_);
  Executor executor_ HORA_GUARDED_BY(cycle_mu_);  // runs ops through transport_
  // This rank's ops not yet completed.
  std::unordered_map<std::string, Local> local_ HORA_GUARDED_BY(cycle_mu_);
  // Cache bit -> name waiting on it.
  std::map<std::size_t, std::string> hits_ HORA_GUARDED_BY(cycle_mu_);
  std::vector<std::string> to_announce_ HORA_GUARDED_BY(cycle_mu_);  // in submission order
  // Stall-shutdown proposals for the next round.
  std::vector<std::string> abandon_ HORA_GUARDED_BY(cycle_mu_);
  // This cycle's invalid bits (not inverted).
  std::vector<std::uint64_t> invalid_ HORA_GUARDED_BY(cycle_mu_);
  int idle_streak_ HORA_GUARDED_BY(cycle_mu_) = 0;
  std::string end_why_ HORA_GUARDED_BY(cycle_mu_);  // why cycle() returned false, if it did
};

}  // namespace hora::detail::engine
