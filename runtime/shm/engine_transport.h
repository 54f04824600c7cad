// The async engine's Transport (runtime/engine/transport.h) over shared memory, used when every
// rank of the job is on this host and shared memory is on: every call runs on the engine's own
// ShmGroup (its own segment, never the one of the user's blocking collectives), a group of all
// ranks in global rank order. The negotiation's bit-vector AND is then one small shm allreduce.
//
// Threading: one call at a time, by whichever thread runs the engine's cycle (Transport's
// contract). Failures are hora::Error
// subclasses from ShmGroup (PeerFailure, TimeoutError, AbortedError, MismatchError).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/engine/transport.h"
#include "runtime/shm/shm_group.h"

namespace hora::detail::shm {

class EngineTransport : public engine::Transport {
 public:
  explicit EngineTransport(std::shared_ptr<ShmGroup> group);

  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }

  void allreduce_and(std::span<std::uint64_t> words) override;
  std::vector<std::vector<std::uint8_t>> allgather_bytes(
      std::span<const std::uint8_t> mine) override;
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                 ReduceOp op) override;
  void allgatherv(const void* sendbuf, void* recvbuf, std::span<const std::size_t> counts,
                  DataType type) override;
  void broadcast(void* buffer, std::size_t count, DataType type, int root) override;
  void alltoallv(const void* sendbuf, std::span<const std::size_t> send_splits, void* recvbuf,
                 std::span<const std::size_t> recv_splits, DataType type) override;
  void reducescatter(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                     ReduceOp op) override;

 private:
  std::shared_ptr<ShmGroup> group_;
};

}  // namespace hora::detail::shm
