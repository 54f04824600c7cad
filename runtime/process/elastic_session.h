// This process's place in an elastic job (docs/elastic.md): the round its runtime belongs to and
// the newest round the launcher announced (RESET frames, read by the rendezvous client's reader
// thread). Process-wide: it outlives every Runtime, so a reset can shut one down and build the
// next from the announced assignment.
//
// Threading: every member may be called from any thread; mu_ guards round_, adopted_ and
// newest_, and wait_for_newer() sleeps on cv_, which announce() signals.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "rendezvous/wire.h"
#include "runtime/core/world.h"

namespace hora::detail {

class ElasticSession {
 public:
  static ElasticSession& instance();

  // HORA_ELASTIC=1 (read once).
  bool enabled() const { return enabled_; }
  // HORA_ELASTIC_TIMEOUT in seconds (600 when unset): how long run() waits for a new round.
  std::chrono::milliseconds timeout() const { return timeout_; }

  // The round of the current (or last) runtime: HORA_ROUND until a reset adopted another.
  int round() const;
  // A RESET from the launcher; keeps the newest round. Reader thread.
  void announce(const rdv::wire::Reset& reset);
  // Whether a round newer than round() was announced.
  bool reset_pending() const;
  // Waits until a round newer than round() is announced, up to `deadline`. nullopt on timeout.
  std::optional<rdv::wire::Reset> wait_for_newer(std::chrono::steady_clock::time_point deadline);
  // From now on the runtime is built for `reset` (its numbers override the environment's).
  void adopt(const rdv::wire::Reset& reset);

  // The environment as the next Runtime must see it: `base` with the adopted round's numbers in
  // place of HORA_RANK, HORA_SIZE, ..., HORA_RENDEZVOUS, HORA_ROUND.
  EnvLookup lookup(EnvLookup base) const;

 private:
  ElasticSession();

  const bool enabled_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int round_ = 0;
  std::optional<rdv::wire::Reset> adopted_;
  std::optional<rdv::wire::Reset> newest_;
};

}  // namespace hora::detail
