#include "runtime/shm/shm_backend.h"

#include <cstring>

#include "runtime/core/blocks.h"
#include "runtime/core/reduce.h"

namespace hora::detail::shm {

ShmBackend::ShmBackend(std::shared_ptr<ShmGroup> group, bool global)
    : group_(std::move(group)), global_(global) {}

void ShmBackend::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                           ReduceOp op, Scope scope, void*) {
  group_->allreduce(sendbuf, recvbuf, count, type, op, name_of(scope));
  if (op == ReduceOp::kAverage) divide(recvbuf, count, type, group_->size());
}

void ShmBackend::allgather(const void* sendbuf, std::size_t count, void* recvbuf,
                           const std::vector<std::size_t>& counts, DataType type, Scope scope,
                           void*) {
  group_->allgather(sendbuf, count, recvbuf, counts, type, name_of(scope));
}

void ShmBackend::broadcast(void* buffer, std::size_t count, DataType type, int root, Scope scope,
                           void*) {
  group_->broadcast(buffer, count, type, root, name_of(scope));
}

void ShmBackend::alltoall(const void* sendbuf, const std::vector<std::size_t>& send_splits,
                          void* recvbuf, const std::vector<std::size_t>& recv_splits, DataType type,
                          Scope scope, void*) {
  group_->alltoall(sendbuf, send_splits, recvbuf, recv_splits, type, name_of(scope));
}

void ShmBackend::reducescatter(const void* sendbuf, std::size_t count, void* recvbuf, DataType type,
                               ReduceOp op, Scope scope, void*) {
  const auto blocks = block_counts(count, group_->size());
  group_->reducescatter(sendbuf, recvbuf, blocks, type, op, name_of(scope));
  if (op == ReduceOp::kAverage) {
    divide(recvbuf, blocks[static_cast<std::size_t>(group_->rank())], type, group_->size());
  }
}

void ShmBackend::barrier(Scope scope, void*) { group_->barrier(name_of(scope)); }

}  // namespace hora::detail::shm
