// An in-process implementation of the engine's Transport: N threads act as N ranks and meet in
// a ThreadWorld (shared memory plus a barrier with a deadline). It implements the real semantics
// of every call (bitwise AND, gathers, reductions via the runtime's reduce functions, splits), so
// the engine's logic runs as it would over Gloo, minus the sockets.
//
// Each collective call is one step: every rank publishes its contribution, waits for all (first
// barrier), computes its own result from everyone's contributions, waits until all have read
// (second barrier), then writes its output (so in-place buffers are never overwritten while a
// peer reads them). Ranks calling different collectives in the same step (the engine diverged)
// throw hora::Error on every rank; a rank that does not arrive within the timeout makes the
// others throw hora::TimeoutError naming it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine/transport.h"

namespace hora::test {

class ThreadWorld {
 public:
  struct Contribution {
    std::string what;  // which collective
    const void* send = nullptr;
    std::size_t count = 0;
    std::vector<std::size_t> splits;  // allgatherv counts / alltoallv send splits
    DataType type = DataType::kUInt8;
    ReduceOp op = ReduceOp::kSum;
    int root = 0;
  };

  explicit ThreadWorld(int size, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  int size() const { return size_; }

  // One collective step for `rank` (see above). `compute` runs between the barriers with every
  // rank's contribution; `commit` runs after the second barrier.
  void step(int rank, const Contribution& mine,
            const std::function<void(const std::vector<const Contribution*>&)>& compute,
            const std::function<void()>& commit);

  // A plain barrier with the world's deadline (for test harnesses).
  void barrier(int rank, const std::string& what);

 private:
  int size_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> arrived_;
  int waiting_ = 0;
  std::uint64_t generation_ = 0;
  bool broken_ = false;
  std::vector<const Contribution*> slots_;
};

class ThreadTransport : public detail::engine::Transport {
 public:
  ThreadTransport(ThreadWorld& world, int rank) : world_(world), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return world_.size(); }

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

  // Calls so far, per method (read from any thread).
  std::atomic<int> and_calls{0};
  std::atomic<int> gather_bytes_calls{0};
  std::atomic<int> allreduce_calls{0};
  std::atomic<int> data_calls{0};  // every data-plane call, allreduce included

 private:
  void reduce_all(const std::vector<const ThreadWorld::Contribution*>& all, std::size_t count,
                  DataType type, ReduceOp op, std::vector<std::uint8_t>& out) const;

  ThreadWorld& world_;
  int rank_;
};

}  // namespace hora::test
