// The process's hora state, in one object: the Runtime that hora::init() creates (which owns the
// rendezvous connection and the backends) and the async engine with its transport, behind one
// mutex. The only other process-wide state is caches: the logger, the GPU query, and the
// host names hora::hostname() hands out (docs/architecture.md).
//
// Lifetime and threading. There is one Process, created on first use and never destroyed (the
// atexit shutdown may run after other static destructors). Every method may be called from any
// thread. A public call takes a shared_ptr to the Runtime or Engine for its own duration, so
// shutdown() on another thread never frees them under it: shutdown() removes them from the
// Process (later calls throw "called before hora::init()"), shuts them down (calls still
// holding one throw "called after hora::shutdown()"), and the last holder destroys them.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hora::detail {

class Runtime;
namespace engine {
class Engine;
class Transport;
}  // namespace engine

class Process {
 public:
  static Process& instance();

  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // hora::init(): joins the job from the environment unless already joined, starts the engine,
  // and registers an atexit shutdown once. Throws hora::Error subclasses naming the step.
  void init();
  // hora::shutdown(): stops the engine, then leaves the job. No-op when not initialized.
  // at_exit: called by the exit handler libhora registers, not by the program: the goodbye goes
  // first and says so (Runtime::goodbye_at_exit).
  void shutdown(bool at_exit = false);
  bool initialized() const;

  // The Runtime for one call, or hora::UsageError("hora::<what> called before hora::init()").
  std::shared_ptr<Runtime> runtime(const char* what) const;
  // The engine for one submission; null when not initialized.
  std::shared_ptr<engine::Engine> engine() const;
  // hora::hostname(): a reference that stays valid after shutdown (the names are kept).
  const std::string& hostname(const char* what) const;

  // Process sets (<hora/process_set.h>). add/remove are collectives of the whole job: each
  // rank validates the ranks alike (UsageError before any communication), forms the set's
  // Runtime and engine when it is a member, and takes part in the exchange when it is not.
  int add_process_set(std::vector<int> ranks);
  void remove_process_set(int id);
  std::vector<int> process_set_ids() const;
  std::vector<int> process_set_ranks(const char* what, int id) const;  // ascending
  // The set's Runtime / engine for one call; UsageError for an unknown set or a non-member.
  // Id 0 is the job's (runtime(), engine()).
  std::shared_ptr<Runtime> runtime(const char* what, int set_id) const;
  std::shared_ptr<engine::Engine> engine(const std::string& what, int set_id) const;

  // For unit tests of the async API without a job: installs `engine` (null removes it) without
  // a Runtime. The caller starts and shuts the engine down itself.
  void set_engine_for_test(std::shared_ptr<engine::Engine> engine);

 private:
  Process() = default;

  mutable std::mutex mutex_;  // guards the members below (not the objects they point to)
  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<engine::Engine> engine_;
  std::unique_ptr<engine::Transport> engine_transport_;  // used by engine_ until it stops
  bool atexit_registered_ = false;
  struct ProcessSetState {
    std::vector<int> ranks;
    // Null where this rank is not a member.
    std::shared_ptr<Runtime> runtime;
    std::shared_ptr<engine::Engine> engine;
    std::unique_ptr<engine::Transport> transport;  // used by engine until it stops
  };
  std::map<int, ProcessSetState> sets_;  // by id; the global set is not in it
  int next_set_id_ = 1;                  // restarts at every init()
  // Serializes add/remove (each a collective) without holding mutex_ while they wait.
  std::mutex sets_call_mutex_;
  // Under mutex_: set `id` (not 0), or UsageError naming the call: before init(), an unknown
  // set, or (member) a set this rank is not in.
  const ProcessSetState& find_set(const char* what, int id, bool member) const;
  // Stops one set's engine and Runtime (outside mutex_).
  static void stop_set(ProcessSetState& set);
};

}  // namespace hora::detail
