// The async engine's Transport (runtime/engine/transport.h) over Gloo: every call runs on the
// mesh's dedicated engine context (Group::kEngine), so the engine's background thread never
// shares a Gloo context, its tags or its failure state with the user's blocking collectives.
// In a world of one (no Gloo backend) every call is a local copy.
//
// Threading: one call at a time, by whichever thread runs the engine's cycle (Transport's
// contract). Failures are hora::Error
// subclasses from GlooBackend (PeerFailure, TimeoutError, AbortedError, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/world.h"
#include "runtime/engine/transport.h"
#include "runtime/gloo/gloo_backend.h"

namespace hora::detail::gloo {

class EngineTransport : public engine::Transport {
 public:
  // gloo may be null only when world.size == 1. Both must outlive the transport.
  EngineTransport(const WorldInfo& world, GlooBackend* gloo);

  int rank() const override { return world_.rank; }
  int size() const override { return world_.size; }

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
  const WorldInfo& world_;
  GlooBackend* gloo_;
};

}  // namespace hora::detail::gloo
