#include "runtime/gloo/engine_transport.h"

#include <cstring>
#include <numeric>

#include <hora/error.h>

#include "runtime/core/blocks.h"
#include "runtime/core/reduce.h"

namespace hora::detail::gloo {
namespace {

constexpr Group kGroup = Group::kEngine;

std::size_t total(std::span<const std::size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

}  // namespace

EngineTransport::EngineTransport(const WorldInfo& world, GlooBackend* gloo)
    : world_(world), gloo_(gloo) {
  if (gloo_ == nullptr && world_.size != 1) {
    throw Error("internal: the engine transport of a multi-rank job needs the Gloo backend",
                world_.rank, world_.hostname);
  }
}

void EngineTransport::allreduce_and(std::span<std::uint64_t> words) {
  if (world_.size == 1 || words.empty()) return;
  gloo_->allreduce_custom(words.data(), words.size(), sizeof(std::uint64_t), engine::and_words,
                          "engine negotiation (bit vector)", kGroup);
}

std::vector<std::vector<std::uint8_t>> EngineTransport::allgather_bytes(
    std::span<const std::uint8_t> mine) {
  if (world_.size == 1) return {std::vector<std::uint8_t>(mine.begin(), mine.end())};
  const auto counts = gloo_->allgather_counts(mine.size(), kGroup);
  std::vector<std::uint8_t> all(std::max<std::size_t>(total(counts), 1));
  if (total(counts) > 0) {
    gloo_->allgather(mine.data(), mine.size(), all.data(), counts, DataType::kUInt8, kGroup);
  }
  return engine::split_blobs(all, counts);
}

void EngineTransport::allreduce(const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, ReduceOp op) {
  if (count == 0) return;
  if (sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, count * size_of(type));
  if (world_.size == 1) return;
  gloo_->allreduce(recvbuf, count, type, op, kGroup);
  if (op == ReduceOp::kAverage) divide(recvbuf, count, type, world_.size);
}

void EngineTransport::allgatherv(const void* sendbuf, void* recvbuf,
                                 std::span<const std::size_t> counts, DataType type) {
  const std::size_t mine = counts[static_cast<std::size_t>(world_.rank)];
  if (total(counts) == 0) return;
  if (world_.size == 1) {
    if (sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, mine * size_of(type));
    return;
  }
  gloo_->allgather(sendbuf, mine, recvbuf, std::vector<std::size_t>(counts.begin(), counts.end()),
                   type, kGroup);
}

void EngineTransport::broadcast(void* buffer, std::size_t count, DataType type, int root) {
  if (count == 0 || world_.size == 1) return;
  gloo_->broadcast(buffer, count, type, root, kGroup);
}

void EngineTransport::alltoallv(const void* sendbuf, std::span<const std::size_t> send_splits,
                                void* recvbuf, std::span<const std::size_t> recv_splits,
                                DataType type) {
  if (world_.size == 1) {
    const std::size_t n = total(send_splits);
    if (n > 0 && sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, n * size_of(type));
    return;
  }
  gloo_->alltoall(sendbuf, std::vector<std::size_t>(send_splits.begin(), send_splits.end()),
                  recvbuf, std::vector<std::size_t>(recv_splits.begin(), recv_splits.end()), type,
                  kGroup);
}

void EngineTransport::reducescatter(const void* sendbuf, void* recvbuf, std::size_t count,
                                    DataType type, ReduceOp op) {
  if (count == 0) return;
  const int n = world_.size;
  if (n == 1) {
    if (sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, count * size_of(type));
    return;
  }
  const std::vector<std::size_t> blocks = block_counts(count, n);
  gloo_->reducescatter(sendbuf, recvbuf, blocks, type, op, kGroup);
  if (op == ReduceOp::kAverage) divide(recvbuf, blocks[world_.rank], type, n);
}

}  // namespace hora::detail::gloo
