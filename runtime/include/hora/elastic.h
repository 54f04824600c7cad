// Elastic training on hora (docs/elastic.md): a job launched with horarun's elastic flags
// (--min-np, --max-np, --host-discovery-script) keeps running when a host is lost and grows when
// one is found. Between its commits a program's state can be lost; run() brings every rank back
// to the last commit, on the new set of ranks, and calls the training function again.
//
//   struct MyState : hora::elastic::State {
//     std::vector<float> weights; int epoch = 0;   // what training needs to go on
//     std::vector<float> saved_weights; int saved_epoch = 0;
//     void save() override { saved_weights = weights; saved_epoch = epoch; }
//     void restore() override { weights = saved_weights; epoch = saved_epoch; }
//     void sync() override { /* hora::broadcast from rank 0 */ }
//   };
//   MyState state;
//   hora::elastic::run(state, [&](MyState& s) {
//     for (; s.epoch < 10; ++s.epoch) { train_one_epoch(s); s.commit(); }
//   });
//
// Outside an elastic job (no HORA_ELASTIC in the environment) run() calls the function once,
// after sync(); commit() saves; nothing ever resets: the same program runs in a fixed-size job.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include <hora/error.h>

namespace hora::elastic {

// Raised by State::commit() (through check_host_updates()) on every rank at the same commit when
// the launcher found new hosts: run() then moves every rank to the new round without restoring
// (nothing was lost). Horovod's HostsUpdatedInterrupt.
class HostsUpdatedInterrupt : public Error {
 public:
  explicit HostsUpdatedInterrupt(const std::string& message, int rank = -1)
      : Error(message, rank) {}
};

// Whether this process is a worker of an elastic job (HORA_ELASTIC=1 from horarun).
bool enabled();

// The round this process's runtime belongs to: 0 at the start of the job, +1 at every reset.
int round();

// Whether the launcher announced a newer round (new hosts, or a lost peer) that this rank has
// not joined yet. Local; no communication.
bool reset_pending();

// Moves this rank to the launcher's next round: waits (up to `timeout`) for the launcher's
// assignment when it has not arrived yet, shuts the runtime down and initialises it again as
// the new rank of the new size (shared memory, Gloo, the engine). Throws TimeoutError when no
// assignment came in time, UsageError outside an elastic job.
void reset(std::chrono::milliseconds timeout);

// The state a training function needs to resume. save()/restore()/sync() are the program's;
// commit() and check_host_updates() are hora's.
class State {
 public:
  virtual ~State() = default;

  // Copies the live state aside (what restore() goes back to).
  virtual void save() = 0;
  // Goes back to the last save(), after a failure lost the work since.
  virtual void restore() = 0;
  // Makes every rank's state rank 0's (a broadcast), after a reset or at the start.
  virtual void sync() = 0;

  // save(), then check_host_updates(): throws HostsUpdatedInterrupt on every rank together when
  // the launcher announced new hosts.
  void commit();
  // Agrees with every rank (rank 0 decides) whether a new round was announced; throws
  // HostsUpdatedInterrupt if so.
  void check_host_updates();

  // Called after every reset, before sync() (e.g. to scale the learning rate by the new size).
  void register_reset_callback(std::function<void()> callback);
  void on_reset();

 private:
  std::vector<std::function<void()>> reset_callbacks_;
};

namespace detail {
// run()'s loop without the template: `call` runs the training function.
void run_loop(State& state, const std::function<void()>& call);
}  // namespace detail

// Runs fn(state) until it returns. In an elastic job: a PeerFailure, AbortedError,
// ConnectionError or TimeoutError inside it (a rank was lost or stopped answering) restores the
// last commit, resets to the launcher's next round and calls fn again after sync();
// HostsUpdatedInterrupt resets without restoring. Other exceptions pass through. Throws
// TimeoutError when the launcher sends no new round within HORA_ELASTIC_TIMEOUT (horarun's
// --elastic-timeout).
template <class S, class F>
void run(S& state, F&& fn) {
  detail::run_loop(state, [&] { fn(state); });
}

}  // namespace hora::elastic
