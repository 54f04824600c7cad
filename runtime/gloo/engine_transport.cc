#include "runtime/gloo/engine_transport.h"

#include <cstring>
#include <numeric>

#include <hora/error.h>

#include "runtime/shm/shm_group.h"
#include "runtime/src/reduce.h"

namespace hora::detail {
namespace {

constexpr Group kGroup = Group::kEngine;
constexpr const char kShmGroup[] = "engine";

void bitwise_and(void* out, const void* a, const void* b, std::size_t count) {
  auto* o = static_cast<unsigned char*>(out);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (std::size_t i = 0; i < count * sizeof(std::uint64_t); ++i) {
    o[i] = static_cast<unsigned char>(x[i] & y[i]);
  }
}

std::size_t total(std::span<const std::size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

}  // namespace

EngineTransport::EngineTransport(const WorldInfo& world, GlooBackend* gloo, shm::ShmGroup* shm)
    : world_(world), gloo_(gloo), shm_(shm) {
  if (gloo_ == nullptr && world_.size != 1) {
    throw Error("internal: the engine transport of a multi-rank job needs the Gloo backend",
                world_.rank, world_.hostname);
  }
}

void EngineTransport::allreduce_and(std::span<std::uint64_t> words) {
  if (world_.size == 1 || words.empty()) return;
  if (shm_) {
    return shm_->allreduce_custom(words.data(), words.size(), sizeof(std::uint64_t), bitwise_and,
                                  "engine negotiation (bit vector)", kShmGroup);
  }
  gloo_->allreduce_custom(words.data(), words.size(), sizeof(std::uint64_t), bitwise_and,
                          "engine negotiation (bit vector)", kGroup);
}

std::vector<std::vector<std::uint8_t>> EngineTransport::allgather_bytes(
    std::span<const std::uint8_t> mine) {
  if (world_.size == 1) return {std::vector<std::uint8_t>(mine.begin(), mine.end())};
  std::vector<std::size_t> counts;
  if (shm_) {
    const std::uint64_t size = mine.size();
    std::vector<std::uint64_t> sizes(static_cast<std::size_t>(world_.size));
    shm_->allgather(&size, 1, sizes.data(), std::vector<std::size_t>(sizes.size(), 1),
                    DataType::kInt64, kShmGroup);
    counts.assign(sizes.begin(), sizes.end());
  } else {
    counts = gloo_->allgather_counts(mine.size(), kGroup);
  }
  std::vector<std::uint8_t> all(std::max<std::size_t>(total(counts), 1));
  if (total(counts) > 0 && shm_) {
    shm_->allgather(mine.data(), mine.size(), all.data(), counts, DataType::kUInt8, kShmGroup);
  } else if (total(counts) > 0) {
    gloo_->allgather(mine.data(), mine.size(), all.data(), counts, DataType::kUInt8, kGroup);
  }
  std::vector<std::vector<std::uint8_t>> out(counts.size());
  std::size_t at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    out[r].assign(all.begin() + static_cast<std::ptrdiff_t>(at),
                  all.begin() + static_cast<std::ptrdiff_t>(at + counts[r]));
    at += counts[r];
  }
  return out;
}

void EngineTransport::allreduce(const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, ReduceOp op) {
  if (count == 0) return;
  if (sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, count * size_of(type));
  if (world_.size == 1) return;
  if (shm_) {
    shm_->allreduce(recvbuf, count, type, op, kShmGroup);
  } else {
    gloo_->allreduce(recvbuf, count, type, op, kGroup);
  }
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
  const std::vector<std::size_t> all(counts.begin(), counts.end());
  if (shm_) return shm_->allgather(sendbuf, mine, recvbuf, all, type, kShmGroup);
  gloo_->allgather(sendbuf, mine, recvbuf, all, type, kGroup);
}

void EngineTransport::broadcast(void* buffer, std::size_t count, DataType type, int root) {
  if (count == 0 || world_.size == 1) return;
  if (shm_) return shm_->broadcast(buffer, count, type, root, kShmGroup);
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
  const std::vector<std::size_t> sends(send_splits.begin(), send_splits.end());
  const std::vector<std::size_t> recvs(recv_splits.begin(), recv_splits.end());
  if (shm_) return shm_->alltoall(sendbuf, sends, recvbuf, recvs, type, kShmGroup);
  gloo_->alltoall(sendbuf, sends, recvbuf, recvs, type, kGroup);
}

void EngineTransport::reducescatter(const void* sendbuf, void* recvbuf, std::size_t count,
                                    DataType type, ReduceOp op) {
  if (count == 0) return;
  const int n = world_.size;
  if (n == 1) {
    if (sendbuf != recvbuf) std::memmove(recvbuf, sendbuf, count * size_of(type));
    return;
  }
  std::vector<std::size_t> blocks(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    blocks[r] = count / n + (static_cast<std::size_t>(r) < count % n ? 1 : 0);
  }
  if (shm_) {
    shm_->reducescatter(sendbuf, recvbuf, blocks, type, op, kShmGroup);
  } else {
    gloo_->reducescatter(sendbuf, recvbuf, blocks, type, op, kGroup);
  }
  if (op == ReduceOp::kAverage) divide(recvbuf, blocks[world_.rank], type, n);
}

}  // namespace hora::detail
