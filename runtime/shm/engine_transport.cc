#include "runtime/shm/engine_transport.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "runtime/core/blocks.h"
#include "runtime/core/reduce.h"
#include "runtime/shm/shm_backend.h"

namespace hora::detail::shm {
namespace {

constexpr const char kGroup[] = "engine";

std::size_t total(std::span<const std::size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

}  // namespace

EngineTransport::EngineTransport(std::shared_ptr<ShmGroup> group) : group_(std::move(group)) {}

void EngineTransport::allreduce_and(std::span<std::uint64_t> words) {
  if (words.empty()) return;
  group_->allreduce_custom(words.data(), words.size(), sizeof(std::uint64_t), engine::and_words,
                           "engine negotiation (bit vector)", kGroup);
}

std::vector<std::vector<std::uint8_t>> EngineTransport::allgather_bytes(
    std::span<const std::uint8_t> mine) {
  const std::uint64_t size = mine.size();
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(group_->size()));
  group_->allgather(&size, 1, sizes.data(), std::vector<std::size_t>(sizes.size(), 1),
                    DataType::kInt64, kGroup);
  const std::vector<std::size_t> counts(sizes.begin(), sizes.end());
  std::vector<std::uint8_t> all(std::max<std::size_t>(total(counts), 1));
  if (total(counts) > 0) {
    group_->allgather(mine.data(), mine.size(), all.data(), counts, DataType::kUInt8, kGroup);
  }
  return engine::split_blobs(all, counts);
}

void EngineTransport::allreduce(const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, ReduceOp op) {
  if (count == 0) return;
  group_->allreduce(sendbuf, recvbuf, count, type, op, kGroup);
  if (op == ReduceOp::kAverage) divide(recvbuf, count, type, group_->size());
}

void EngineTransport::allgatherv(const void* sendbuf, void* recvbuf,
                                 std::span<const std::size_t> counts, DataType type) {
  if (total(counts) == 0) return;
  const std::size_t mine = counts[static_cast<std::size_t>(group_->rank())];
  group_->allgather(sendbuf, mine, recvbuf, std::vector<std::size_t>(counts.begin(), counts.end()),
                    type, kGroup);
}

void EngineTransport::broadcast(void* buffer, std::size_t count, DataType type, int root) {
  if (count == 0) return;
  group_->broadcast(buffer, count, type, root, kGroup);
}

void EngineTransport::alltoallv(const void* sendbuf, std::span<const std::size_t> send_splits,
                                void* recvbuf, std::span<const std::size_t> recv_splits,
                                DataType type) {
  group_->alltoall(sendbuf, std::vector<std::size_t>(send_splits.begin(), send_splits.end()),
                   recvbuf, std::vector<std::size_t>(recv_splits.begin(), recv_splits.end()), type,
                   kGroup);
}

void EngineTransport::reducescatter(const void* sendbuf, void* recvbuf, std::size_t count,
                                    DataType type, ReduceOp op) {
  if (count == 0) return;
  const auto blocks = block_counts(count, group_->size());
  group_->reducescatter(sendbuf, recvbuf, blocks, type, op, kGroup);
  if (op == ReduceOp::kAverage) {
    divide(recvbuf, blocks[static_cast<std::size_t>(group_->rank())], type, group_->size());
  }
}

}  // namespace hora::detail::shm
