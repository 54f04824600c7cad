// CPU collectives over Gloo, on the contexts build_mesh() formed: the host Backend
// (runtime/core/backend.h) of a launched job, and the engine's transport (engine_transport.h).
//
// The caller (Runtime) validates arguments and handles scopes of one rank; every method here
// needs a scope with at least two ranks and runs on the caller's thread. Each operation gets
// the next tag of its scope (ranks call collectives in the same order, so tags agree) and the
// job's timeout (HORA_TIMEOUT_SECONDS).
//
// Failures become hora::Error subclasses that name this rank and host, the operation, and the
// peer when Gloo's message lets us find it (PeerFailure). Gloo closes every pair of a context
// after a timeout, so the first failure breaks that scope for good: later operations on it
// fail at once, quoting the first error. After the launcher's abort everything fails with
// AbortedError.
//
// Every public collective first checks that all ranks of the scope run the same one with the
// same counts, types, ops and roots (op_check.h), so a disagreement is a MismatchError on every
// rank instead of a Gloo abort, a hang or wrong data.
//
// Allreduces of at most mesh.sync.max_bytes on a group with a sync twin (global, engine,
// cross; sync_policy.h) run on that twin (sync_allreduce.h), with tags of its own; a failure
// on either breaks the scope.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <hora/types.h>

#include "runtime/core/abort_state.h"
#include "runtime/core/backend.h"
#include "runtime/core/reduce.h"
#include "runtime/core/world.h"
#include "runtime/gloo/mesh.h"

namespace hora::detail::gloo {

struct OpHeader;  // op_check.h
struct OpCheck;

// The Gloo contexts of a rank: the three scopes of the public API, and the async engine's own
// global context (so its background thread never shares a context with the user's thread).
enum class Group : std::uint8_t { kGlobal = 0, kLocal = 1, kCross = 2, kEngine = 3 };

inline Group group_of(Scope scope) { return static_cast<Group>(scope); }
const char* group_name(Group group);  // "global", "local", "cross", "engine"

class GlooBackend : public Backend {
 public:
  GlooBackend(const WorldInfo& world, Mesh mesh, const AbortState& abort);
  ~GlooBackend() override;

  GlooBackend(const GlooBackend&) = delete;
  GlooBackend& operator=(const GlooBackend&) = delete;

  // --- Backend: the public collectives on a scope (kAverage divided here; stream unused). ---
  const char* name() const override { return "gloo"; }
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
                 Scope scope, void* stream) override;
  void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                 const std::vector<std::size_t>& counts, DataType type, Scope scope,
                 void* stream) override;
  void broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope,
                 void* stream) override;
  void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
                const std::vector<std::size_t>& recv_splits, DataType type, Scope scope,
                void* stream) override;
  void reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                     ReduceOp op, Scope scope, void* stream) override;
  void barrier(Scope scope, void* stream) override;
  // Fails every context at once (close_all). The AbortState the mesh registered with does the
  // same on the launcher's abort; this is for callers that abort the backend directly.
  void abort(const std::string& reason) override;
  // Nothing to do early: the contexts close when the last holder drops the backend.
  void close() override {}

  // --- On a Group (the engine's transport uses Group::kEngine). ---
  // Every method may be called from one thread per group at a time: the groups share nothing
  // but the abort state (thread-safe).

  // In place on `buffer`. kAverage sums; the caller divides.
  void allreduce(void* buffer, std::size_t count, DataType type, ReduceOp op, Group scope);
  void allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                 const std::vector<std::size_t>& counts, DataType type, Group scope);
  std::vector<std::size_t> allgather_counts(std::size_t count, Group scope);
  void broadcast(void* buffer, std::size_t count, DataType type, int root, Group scope);
  void alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits, void* recvbuf,
                const std::vector<std::size_t>& recv_splits, DataType type, Group scope);
  std::vector<std::size_t> alltoall_splits(const std::vector<std::size_t>& send_splits,
                                           Group scope);
  // block_counts[i] elements of the reduction go to scope rank i. kAverage sums.
  void reducescatter(const void* sendbuf, void* recvbuf,
                     const std::vector<std::size_t>& block_counts, DataType type, ReduceOp op,
                     Group scope);
  void barrier(Group scope);
  // In place with a reduction of the caller's (the engine's bitwise AND of uint64 words).
  void allreduce_custom(void* buffer, std::size_t count, std::size_t element_size, ReduceFn reduce,
                        const char* name, Group scope);

  // Fails every context (peers see the connections close). Thread-safe.
  void close_all(const std::string& reason);

  const Mesh& mesh() const { return mesh_; }

 private:
  // What an operation was, formatted only when it fails; a scope's contexts, tags, buffers and
  // first failure. Both are defined in gloo_backend.cc, which alone needs the op check's, the
  // sync allreduce's and the ring's headers.
  struct OpInfo;
  struct ScopeState;
  struct Scopes;

  // info.sync: on the scope's sync twin (which must exist).
  template <typename Body>
  void run(Group scope, const OpInfo& info, Body&& body);
  // Before a public collective (op_check.h): exchanges what every rank is about to run, on the
  // sync twin when the scope has one; throws MismatchError (and breaks the scope) on every rank
  // when they disagree. Not for the engine's group (the engine checks its own).
  void check(Group scope, const OpInfo& info, const OpHeader& mine);
  // After the exchange: MismatchError (the scope broken) unless every rank agreed.
  void throw_if_disagree(Group scope, const OpInfo& info, const OpCheck& merged);
  [[noreturn]] void fail(ScopeState& state, MeshContext& context, Group scope, const OpInfo& info);
  // Whether an allreduce of `bytes` on `scope` goes to its sync twin.
  bool on_sync(Group scope, std::size_t bytes);
  std::string describe(const OpInfo& info, Group scope) const;
  ScopeState& state(Group scope);
  int size_of_scope(Scope scope) const;
  int rank_in(Scope scope) const;  // this rank's rank in the scope

  const WorldInfo& world_;
  Mesh mesh_;
  const AbortState& abort_;
  std::unique_ptr<Scopes> scopes_;  // by Group
};

}  // namespace hora::detail::gloo
