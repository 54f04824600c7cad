#include "test/runtime/engine/thread_transport.h"

#include <cstring>

#include <hora/error.h>

#include "runtime/core/reduce.h"

namespace hora::test {

ThreadWorld::ThreadWorld(int size, std::chrono::milliseconds timeout)
    : size_(size),
      timeout_(timeout),
      arrived_(static_cast<std::size_t>(size), false),
      slots_(static_cast<std::size_t>(size), nullptr) {}

void ThreadWorld::barrier(int rank, const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) throw Error("thread world: broken by an earlier timeout", rank);
  const std::uint64_t gen = generation_;
  arrived_[static_cast<std::size_t>(rank)] = true;
  if (++waiting_ == size_) {
    waiting_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), false);
    ++generation_;
    cv_.notify_all();
    return;
  }
  if (!cv_.wait_until(lock, std::chrono::steady_clock::now() + timeout_,
                      [&] { return generation_ != gen || broken_; })) {
    std::string missing;
    for (int r = 0; r < size_; ++r) {
      if (!arrived_[static_cast<std::size_t>(r)])
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    broken_ = true;
    cv_.notify_all();
    throw TimeoutError("thread world: rank " + std::to_string(rank) + " waited " +
                           std::to_string(timeout_.count()) + " ms in " + what + " for ranks " +
                           missing,
                       rank);
  }
  if (generation_ == gen) throw Error("thread world: broken by another rank's timeout", rank);
}

void ThreadWorld::step(int rank, const Contribution& mine,
                       const std::function<void(const std::vector<const Contribution*>&)>& compute,
                       const std::function<void()>& commit) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    slots_[static_cast<std::size_t>(rank)] = &mine;
  }
  barrier(rank, mine.what + " (arrive)");
  std::vector<const Contribution*> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all = slots_;
  }
  std::string divergence;
  for (int r = 0; r < size_; ++r) {
    if (all[static_cast<std::size_t>(r)]->what != all[0]->what) {
      divergence = "thread world: rank 0 called " + all[0]->what + " but rank " +
                   std::to_string(r) + " called " + all[static_cast<std::size_t>(r)]->what;
      break;
    }
  }
  if (divergence.empty()) compute(all);
  barrier(rank, mine.what + " (depart)");
  if (!divergence.empty()) throw Error(divergence, rank);
  commit();
}

void ThreadTransport::reduce_all(const std::vector<const ThreadWorld::Contribution*>& all,
                                 std::size_t count, DataType type, ReduceOp op,
                                 std::vector<std::uint8_t>& out) const {
  const std::size_t bytes = count * size_of(type);
  out.assign(static_cast<const std::uint8_t*>(all[0]->send),
             static_cast<const std::uint8_t*>(all[0]->send) + bytes);
  detail::ReduceFn fn = detail::reduce_function(type, op);
  for (std::size_t r = 1; r < all.size(); ++r) fn(out.data(), out.data(), all[r]->send, count);
  if (op == ReduceOp::kAverage) detail::divide(out.data(), count, type, size());
}

void ThreadTransport::allreduce_and(std::span<std::uint64_t> words) {
  and_calls++;
  ThreadWorld::Contribution c;
  c.what = "allreduce_and";
  c.send = words.data();
  c.count = words.size();
  std::vector<std::uint64_t> result;
  world_.step(
      rank_, c,
      [&](const auto& all) {
        result.assign(words.begin(), words.end());
        for (const auto* other : all) {
          if (other->count != words.size()) {
            throw Error("thread world: allreduce_and with " + std::to_string(words.size()) +
                        " words on rank " + std::to_string(rank_) + " but " +
                        std::to_string(other->count) + " elsewhere");
          }
          const auto* w = static_cast<const std::uint64_t*>(other->send);
          for (std::size_t i = 0; i < result.size(); ++i) result[i] &= w[i];
        }
      },
      [&] { std::copy(result.begin(), result.end(), words.begin()); });
}

std::vector<std::vector<std::uint8_t>> ThreadTransport::allgather_bytes(
    std::span<const std::uint8_t> mine) {
  gather_bytes_calls++;
  ThreadWorld::Contribution c;
  c.what = "allgather_bytes";
  c.send = mine.data();
  c.count = mine.size();
  std::vector<std::vector<std::uint8_t>> result;
  world_.step(
      rank_, c,
      [&](const auto& all) {
        for (const auto* other : all) {
          const auto* p = static_cast<const std::uint8_t*>(other->send);
          result.emplace_back(p, p + other->count);
        }
      },
      [] {});
  return result;
}

void ThreadTransport::allreduce(const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, ReduceOp op) {
  allreduce_calls++;
  data_calls++;
  ThreadWorld::Contribution c{"allreduce", sendbuf, count, {}, type, op};
  std::vector<std::uint8_t> out;
  world_.step(
      rank_, c, [&](const auto& all) { reduce_all(all, count, type, op, out); },
      [&] {
        if (!out.empty()) std::memcpy(recvbuf, out.data(), out.size());
      });
}

void ThreadTransport::allgatherv(const void* sendbuf, void* recvbuf,
                                 std::span<const std::size_t> counts, DataType type) {
  data_calls++;
  const std::size_t mine = counts[static_cast<std::size_t>(rank_)];
  ThreadWorld::Contribution c{"allgatherv", sendbuf, mine, {counts.begin(), counts.end()}, type};
  std::vector<std::uint8_t> out;
  const std::size_t elem = size_of(type);
  world_.step(
      rank_, c,
      [&](const auto& all) {
        for (std::size_t r = 0; r < all.size(); ++r) {
          if (all[r]->count != counts[r]) {
            throw Error("thread world: allgatherv: rank " + std::to_string(rank_) + " expected " +
                        std::to_string(counts[r]) + " elements from rank " + std::to_string(r) +
                        ", it sent " + std::to_string(all[r]->count));
          }
          const auto* p = static_cast<const std::uint8_t*>(all[r]->send);
          out.insert(out.end(), p, p + all[r]->count * elem);
        }
      },
      [&] {
        if (!out.empty()) std::memcpy(recvbuf, out.data(), out.size());
      });
}

void ThreadTransport::broadcast(void* buffer, std::size_t count, DataType type, int root) {
  data_calls++;
  ThreadWorld::Contribution c{"broadcast", buffer, count, {}, type, ReduceOp::kSum, root};
  std::vector<std::uint8_t> out;
  world_.step(
      rank_, c,
      [&](const auto& all) {
        const auto* p = static_cast<const std::uint8_t*>(all[static_cast<std::size_t>(root)]->send);
        out.assign(p, p + count * size_of(type));
      },
      [&] {
        if (rank_ != root && !out.empty()) std::memcpy(buffer, out.data(), out.size());
      });
}

void ThreadTransport::alltoallv(const void* sendbuf, std::span<const std::size_t> send_splits,
                                void* recvbuf, std::span<const std::size_t> recv_splits,
                                DataType type) {
  data_calls++;
  ThreadWorld::Contribution c{
      "alltoallv", sendbuf, 0, {send_splits.begin(), send_splits.end()}, type};
  std::vector<std::uint8_t> out;
  const std::size_t elem = size_of(type);
  world_.step(
      rank_, c,
      [&](const auto& all) {
        for (std::size_t r = 0; r < all.size(); ++r) {
          const auto& splits = all[r]->splits;
          std::size_t offset = 0;
          for (int i = 0; i < rank_; ++i) offset += splits[static_cast<std::size_t>(i)];
          std::size_t n = splits[static_cast<std::size_t>(rank_)];
          if (n != recv_splits[r]) {
            throw Error("thread world: alltoallv: rank " + std::to_string(r) + " sends " +
                        std::to_string(n) + " elements to rank " + std::to_string(rank_) +
                        ", which expects " + std::to_string(recv_splits[r]));
          }
          const auto* p = static_cast<const std::uint8_t*>(all[r]->send) + offset * elem;
          out.insert(out.end(), p, p + n * elem);
        }
      },
      [&] {
        if (!out.empty()) std::memcpy(recvbuf, out.data(), out.size());
      });
}

void ThreadTransport::reducescatter(const void* sendbuf, void* recvbuf, std::size_t count,
                                    DataType type, ReduceOp op) {
  data_calls++;
  ThreadWorld::Contribution c{"reducescatter", sendbuf, count, {}, type, op};
  std::vector<std::uint8_t> out;
  const std::size_t n = static_cast<std::size_t>(size());
  const std::size_t r = static_cast<std::size_t>(rank_);
  const std::size_t block = count / n + (r < count % n ? 1 : 0);
  const std::size_t start = r * (count / n) + std::min(r, count % n);
  const std::size_t elem = size_of(type);
  world_.step(
      rank_, c, [&](const auto& all) { reduce_all(all, count, type, op, out); },
      [&] {
        if (block > 0) std::memcpy(recvbuf, out.data() + start * elem, block * elem);
      });
}

}  // namespace hora::test
