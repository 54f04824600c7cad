// The host Backend (core/backend.h) over shared memory: the ranks of this host, through one
// ShmGroup. It serves the local scope, and the global scope when every rank of the job is on
// this host (local rank i is then global rank i); the Runtime (runtime/process/runtime.cc)
// asks serves() and routes the other scopes to Gloo. The Runtime checks the arguments and never
// calls with a scope of one rank.
//
// Threading: Backend's contract (one op at a time; abort() from any thread). close() is a no-op:
// the segment is unmapped when the last holder drops the backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/core/backend.h"
#include "runtime/shm/shm_group.h"

namespace hora::detail::shm {

class ShmBackend : public Backend {
 public:
  // group: this host's ranks. global: the group is also the global scope.
  ShmBackend(std::shared_ptr<ShmGroup> group, bool global);

  const char* name() const override { return "shm"; }
  bool serves(Scope scope) const {
    return scope == Scope::kLocal || (scope == Scope::kGlobal && global_);
  }
  ShmGroup& group() { return *group_; }

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
  void abort(const std::string& reason) override { group_->abort(reason); }
  void close() override {}

  // What peers see when this process dies (tests of failure handling).
  void close_abruptly() { group_->close_abruptly(); }

 private:
  std::shared_ptr<ShmGroup> group_;
  bool global_;
};

}  // namespace hora::detail::shm
