// One rank's runtime: the rendezvous connection, the Gloo contexts, and the collectives with
// argument checking. The public API (collectives.cc) forwards to the process's Runtime (see
// process_runtime() below); tests build several Runtimes in one process, one per thread, each
// from its own WorldInfo, against a real rdv::Server.
//
// Ownership and threading: a Runtime is used by one thread at a time (collectives are blocking
// and must be called in the same order on every rank). The only other thread that touches it
// is the rendezvous client's reader thread, which calls abort(); that is safe at any time.
// Destruction closes the rendezvous connection first (so no abort callback can run), then the
// Gloo contexts.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <hora/types.h>

#include "runtime/src/abort_state.h"
#include "runtime/src/world.h"

namespace hora::rdv {
class Client;
}

namespace hora::detail {

class GlooBackend;
namespace engine {
class Transport;
}
namespace shm {
class ShmGroup;
}

class Runtime {
 public:
  // Joins the job `world` describes: connects to the rendezvous (authenticated, within
  // world.start_timeout) and forms the global, local and cross Gloo contexts. A world that was
  // not launched (no rendezvous) is a world of one: no connections, collectives are copies.
  // Throws hora::Error subclasses naming the step that failed.
  explicit Runtime(WorldInfo world);
  ~Runtime();  // shutdown(), errors logged

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Tells the rendezvous this rank is leaving on purpose, then closes every connection.
  // Idempotent; later collectives throw hora::UsageError.
  void shutdown();

  // What the other ranks see when this process dies: the Gloo connections and the rendezvous
  // connection close without a goodbye. For tests of failure handling.
  void close_abruptly();

  // The launcher's abort (from the rendezvous reader thread): prints
  // "hora: rank R: job aborted by launcher: <reason>" once to stderr, makes collectives in
  // flight fail and every later call throw hora::AbortedError.
  void abort(const std::string& reason);
  bool aborted() const { return abort_.reason().has_value(); }
  // Runs hook(reason) on the launcher's abort (other backends abort their work with it).
  void on_abort(AbortState::Hook hook) { abort_.on_abort(std::move(hook)); }

  // The rendezvous connection (null in a world of one), for backends that form their own
  // communicators through it (NCCL). Valid until shutdown().
  rdv::Client* client() const { return client_.get(); }

  // A Transport for the async engine on the Gloo context reserved for it (or local copies in a
  // world of one). It must be destroyed before this Runtime shuts down.
  std::unique_ptr<engine::Transport> make_engine_transport();

  const WorldInfo& world() const { return world_; }
  int rank(Scope scope) const;
  int size(Scope scope) const;

  // The public collectives (hora.h documents them), checked and dispatched.
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                 ReduceOp op, Scope scope);
  void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                 const std::vector<std::size_t>& counts, DataType type, Scope scope);
  std::vector<std::size_t> allgather_counts(std::size_t count, Scope scope);
  void broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope);
  void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
                const std::vector<std::size_t>& recv_splits, DataType type, Scope scope);
  std::vector<std::size_t> alltoall_splits(const std::vector<std::size_t>& send_splits,
                                           Scope scope);
  void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                     ReduceOp op, Scope scope);
  void barrier(Scope scope);

 private:
  // Throws if shut down or aborted; validates the scope. Returns the scope's size.
  int enter(const char* what, Scope scope);
  void check_type(const char* what, DataType type) const;
  void check_op(const char* what, ReduceOp op) const;
  // The shared-memory group serving `scope` (CPU buffers), or null: Gloo serves it.
  shm::ShmGroup* shm_for(Scope scope) const;
  // Global allreduce as reducescatter over shared memory, allreduce of this rank's slice over
  // the cross group (Gloo), allgather over shared memory. kAverage sums.
  void hierarchical_allreduce(void* buffer, std::size_t count, DataType type, ReduceOp op);

  WorldInfo world_;
  AbortState abort_;
  std::unique_ptr<GlooBackend> gloo_;    // null in a world of one
  // The ranks of this host over shared memory (runtime/shm/): null with one local rank or
  // HORA_SHM=0. Serves the local scope, and the global one when all ranks are on this host.
  std::shared_ptr<shm::ShmGroup> shm_;
  bool shm_global_ = false;   // shm_ also serves the global scope
  // The async engine's own group (its own segment) when shm_global_: make_engine_transport().
  std::shared_ptr<shm::ShmGroup> engine_shm_;
  bool hierarchical_ = false;  // global allreduce goes through hierarchical_allreduce()
  std::unique_ptr<rdv::Client> client_;  // destroyed first: its reader thread calls abort()
  bool closed_ = false;
};

// --- The process's runtime (what hora::init() creates). ---

// Creates it from the environment unless it exists. Registers an atexit shutdown once.
void process_init();
// Shuts it down and destroys it (no-op when absent).
void process_shutdown();
bool process_initialized();
// The runtime, or hora::UsageError("<what> called before hora::init()").
Runtime& process_runtime(const char* what);

}  // namespace hora::detail
