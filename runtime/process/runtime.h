// One rank's runtime: the rendezvous connection, the backends (Gloo for host memory, NCCL for
// GPU memory), and the public collectives with their argument checks and their routing. The
// public API (runtime/api/) forwards to the process's Runtime (process.h); tests build several
// Runtimes in one process, one per thread, each from its own WorldInfo, against a real
// rdv::Server.
//
// Routing, in one place (plan() in runtime.cc): every collective asks plan() for its Path. An op
// whose buffers are GPU memory goes to the NCCL backend (which checks its own arguments); any
// other op is checked here and is a local copy when its scope holds this rank alone, else goes
// to shared memory (runtime/shm) for the local scope, and for the global scope when every rank
// is on this host (HORA_SHM=0 turns it off), to Gloo otherwise, or, for a global allreduce
// across hosts with the same number of ranks each, to the hierarchical allreduce
// (hierarchical_allreduce.h).
//
// Ownership and threading: collectives are blocking and must be called in the same order on
// every rank, so one thread at a time runs them. Other threads may call rank()/size()/world()
// and shutdown() at any time; the rendezvous client's reader thread calls abort(). shutdown()
// while another thread is inside a collective leaves that collective its backend (a
// shared_ptr) until it returns; calls that start later throw hora::UsageError. Destruction
// closes the rendezvous connection first (so no abort callback can run), then the backends.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <hora/types.h>

#include "runtime/core/abort_state.h"
#include "runtime/core/world.h"

namespace hora::rdv {
class Client;
namespace wire {
struct Reset;
}
}  // namespace hora::rdv

namespace hora::detail {

class Backend;
namespace gloo {
class GlooBackend;
}
namespace nccl {
class Backend;
}
namespace engine {
class Transport;
}
namespace shm {
class ShmBackend;
class ShmGroup;
}  // namespace shm

// A CUDA stream from <hora/cuda.h> (nullptr: the default stream), or none for the host API.
using StreamArg = std::optional<void*>;

class Runtime {
 public:
  // Joins the job `world` describes: connects to the rendezvous (authenticated, within
  // world.start_timeout) and forms the global, local and cross Gloo contexts. A world that was
  // not launched (no rendezvous) is a world of one: no connections, collectives are copies.
  // The NCCL backend is made too; it forms communicators on the first GPU collective.
  // Throws hora::Error subclasses naming the step that failed. `on_reset` gets the launcher's
  // RESET frames (elastic jobs), before an interrupting one aborts this runtime: the Process
  // hands them to its elastic session (process.h); a Runtime itself knows nothing of rounds.
  using ResetHandler = std::function<void(const rdv::wire::Reset&)>;
  explicit Runtime(WorldInfo world, ResetHandler on_reset = {});
  // A process set's Runtime (<hora/process_set.h>), on a member of set `set_id` (members: global
  // ranks, ascending): Gloo contexts of the set's own on `job`'s device and, when every member
  // is on this host, shared-memory groups of its own, formed through `job`'s rendezvous
  // connection. Its world's rank and size are the set's (world().set_id, world().global_rank);
  // its local and cross scopes hold this rank alone; GPU buffers are refused. Every other rank
  // of the job calls join_process_set() meanwhile. The set's Runtime must be shut down before
  // `job`; `job`'s abort reaches it through abort(reason, false).
  Runtime(Runtime& job, int set_id, const std::vector<int>& members);
  // A rank outside the set, while the members form it: its part of the exchange.
  static void join_process_set(Runtime& job, int set_id, const std::vector<int>& members);
  ~Runtime();  // shutdown(), errors logged

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Tells the rendezvous this rank is leaving on purpose, then closes every connection (NCCL
  // communicators first: they may still need the rendezvous). Idempotent; later collectives
  // throw hora::UsageError.
  void shutdown();

  // The goodbye of a process that leaves from an exit handler (exit() or a return from main
  // without hora::shutdown()), sent before the engine and the connections stop: the launcher
  // then knows this rank left first, whatever its peers do when they lose it, and that its exit
  // code decides whether it failed (rendezvous/wire.h kGoodbyeAtExit). shutdown() follows;
  // call it only on a Runtime no other thread can shut down (Process::shutdown's own).
  void goodbye_at_exit();

  // What the other ranks see when this process dies: the Gloo connections and the rendezvous
  // connection close without a goodbye. For tests of failure handling.
  void close_abruptly();

  // The launcher's abort (from the rendezvous reader thread): prints
  // "hora: rank R: job aborted by launcher: <reason>" once to stderr (unless !announce: a
  // process set's Runtime, whose job already said it), makes collectives in flight fail (Gloo
  // and NCCL) and every later call throw hora::AbortedError.
  void abort(const std::string& reason, bool announce = true);
  bool aborted() const { return abort_.reason().has_value(); }
  // Runs hook(reason) on the launcher's abort.
  void on_abort(AbortState::Hook hook) { abort_.on_abort(std::move(hook)); }

  // The rendezvous connection (null in a world of one). Valid until shutdown().
  rdv::Client* client() const { return client_.get(); }

  // A Transport for the async engine: over its own shared-memory group when every rank is on
  // this host, else on the Gloo context reserved for it (or local copies in a world of one).
  // It must be destroyed before this Runtime shuts down.
  std::unique_ptr<engine::Transport> make_engine_transport();

  const WorldInfo& world() const { return world_; }
  int rank(Scope scope) const;
  int size(Scope scope) const;

  // The public collectives (hora.h and cuda.h document them), checked and routed. `stream` is
  // set when the call came through <hora/cuda.h>.
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
                 Scope scope, StreamArg stream = std::nullopt);
  void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                 const std::vector<std::size_t>& counts, DataType type, Scope scope,
                 StreamArg stream = std::nullopt);
  std::vector<std::size_t> allgather_counts(std::size_t count, Scope scope);
  void broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope,
                 StreamArg stream = std::nullopt);
  void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
                const std::vector<std::size_t>& recv_splits, DataType type, Scope scope,
                StreamArg stream = std::nullopt);
  std::vector<std::size_t> alltoall_splits(const std::vector<std::size_t>& send_splits,
                                           Scope scope);
  void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                     ReduceOp op, Scope scope, StreamArg stream = std::nullopt);
  void barrier(Scope scope, StreamArg stream = std::nullopt);

  // The CUDA device this rank uses (hora::cuda_device()).
  int cuda_device();

 private:
  struct Buffer {
    const char* name;
    const void* ptr;
  };

  // What plan() is told of an op.
  struct Op {
    const char* what;
    Scope scope;
    std::initializer_list<Buffer> buffers;
    StreamArg stream;
    // A global allreduce of this many elements may take the hierarchical path (0: it may not).
    std::size_t hierarchical_count = 0;
  };
  // The routing decision, the only one: the path an op takes and the backend that runs it (null
  // for kAlone and kHierarchical). Past the GPU check it is enter()'s: shut down, aborted or an
  // invalid scope throw here. Also throws UsageError for mixed host/GPU buffers, buffers on
  // another GPU, or a stream without a GPU.
  enum class Path { kGpu, kAlone, kShm, kGloo, kHierarchical };
  struct Plan {
    Path path;
    int size;  // of the op's scope (0 for kGpu)
    std::shared_ptr<Backend> backend;
  };
  Plan plan(const Op& op);
  // The GPU part of plan(): the NCCL backend when the op's buffers are on a GPU, else null.
  std::shared_ptr<Backend> route(const char* what, std::initializer_list<Buffer> buffers,
                                 StreamArg stream);
  // True when the op's buffers are on this rank's GPU (mixed or foreign ones are errors).
  bool on_device(const char* what, std::initializer_list<Buffer> buffers);
  // Before a host-memory collective given a stream: work on it (a copy to the host) must land.
  void settle(const char* what, void* stream);

  // Throws if shut down or aborted; validates the scope. Returns the scope's size.
  int enter(const char* what, Scope scope);
  void check_type(const char* what, DataType type) const;
  void check_op(const char* what, ReduceOp op) const;
  [[noreturn]] void throw_closed(const char* what) const;
  // Forms the shared-memory groups and agrees on hierarchical allreduce (init).
  void join_shared_memory(std::chrono::steady_clock::time_point deadline,
                          const std::string& start_hint);
  struct Backends {
    std::shared_ptr<gloo::GlooBackend> gloo;
    std::shared_ptr<nccl::Backend> nccl;
    std::shared_ptr<shm::ShmBackend> shm;
    std::shared_ptr<shm::ShmGroup> engine_shm;
  };
  // Moves every backend out (shutdown): later calls find none and throw.
  Backends take_backends();
  // The backends for one call, or UsageError "called after hora::shutdown()" when shutdown()
  // took them meanwhile (plan() picks between shared memory and Gloo itself).
  std::shared_ptr<gloo::GlooBackend> gloo_backend(const char* what) const;
  std::shared_ptr<nccl::Backend> gpu_backend(const char* what) const;
  // The global allreduce across hosts, when hierarchical_ (host buffers, in place).
  void allreduce_hierarchical(void* buffer, std::size_t count, DataType type, ReduceOp op);

  WorldInfo world_;
  AbortState abort_;
  mutable std::mutex backends_mutex_;        // guards the pointers below, not the backends
  std::shared_ptr<gloo::GlooBackend> gloo_;  // null in a world of one
  std::shared_ptr<nccl::Backend> nccl_;
  // This host's ranks over shared memory (runtime/shm/): null with one local rank or
  // HORA_SHM=0. Serves the local scope, and the global one when all ranks are on this host.
  std::shared_ptr<shm::ShmBackend> shm_;
  // The async engine's own group (its own segment) when shm_ serves the global scope.
  std::shared_ptr<shm::ShmGroup> engine_shm_;
  bool hierarchical_ = false;  // global allreduce of host buffers: allreduce_hierarchical()
  std::unique_ptr<rdv::Client> client_;  // destroyed first: its reader thread calls abort()
  int peer_loss_token_ = 0;  // this Runtime's peer-loss sink (runtime/core/peer_loss.h); 0: none
  std::atomic<bool> closed_{false};
};

}  // namespace hora::detail
