// Every collective x data type x reduction, at world sizes 1, 2, 3 and 4 and on the local and
// cross scopes of fake multi-host layouts, against references computed here. Each rank is a
// thread with its own Runtime, connected through a real rendezvous server and real Gloo TCP
// pairs on 127.0.0.1.
//
// Values are small integers, exactly representable in every type (float16 and bfloat16
// included), so sums and products are exact in any order and results compare exactly.
// Rank threads do not use Catch2 assertions (not thread-safe); they throw, and the test thread
// checks that no rank failed.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <hora/hora.h>
#include <catch2/catch.hpp>

#include "test/runtime/test_job.h"

using hora::DataType;
using hora::ReduceOp;
using hora::Scope;
using hora::detail::Runtime;
using hora::detail::WorldInfo;

namespace {

// --- Values of every element type, through double. ---

template <typename T>
T make(double v) {
  if constexpr (std::is_same_v<T, hora::float16>) {
    return hora::to_float16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, hora::bfloat16>) {
    return hora::to_bfloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double num(T v) {
  if constexpr (std::is_same_v<T, hora::float16> || std::is_same_v<T, hora::bfloat16>) {
    return hora::to_float(v);
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
constexpr bool is_signed_type() {
  return !std::is_same_v<T, std::uint8_t>;
}

template <typename T>
constexpr bool is_integer_type() {
  return std::is_integral_v<T>;
}

// The input of global rank g, element i, for op.
template <typename T>
double input(int g, std::size_t i, ReduceOp op) {
  if (op == ReduceOp::kProduct) {
    int k = static_cast<int>((g + i) % 3) + 1;
    if (is_signed_type<T>() && (g + i) % 2 == 1) k = -k;
    return k;
  }
  const int k = static_cast<int>((g * 5 + i * 3) % 7) + 1;  // 1..7
  return is_signed_type<T>() ? k - 4 : k;
}

// The reduction of inputs of `members` (global ranks) at element i, as the type stores it.
template <typename T>
T reference(const std::vector<int>& members, std::size_t i, ReduceOp op) {
  const int n = static_cast<int>(members.size());
  double acc = input<T>(members[0], i, op);
  for (int k = 1; k < n; ++k) {
    const double v = input<T>(members[k], i, op);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: acc += v; break;
      case ReduceOp::kProduct: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
    }
  }
  if (op != ReduceOp::kAverage) {
    if constexpr (is_integer_type<T>()) {
      return static_cast<T>(static_cast<std::int64_t>(acc));  // wraps like the runtime
    } else {
      return make<T>(acc);
    }
  }
  // Average: the exact sum in T, divided once (integers truncate toward zero).
  if constexpr (is_integer_type<T>()) {
    const T sum = static_cast<T>(static_cast<std::int64_t>(acc));
    return static_cast<T>(static_cast<std::int64_t>(sum) / n);
  } else if constexpr (std::is_same_v<T, double>) {
    return acc / n;
  } else {
    return make<T>(static_cast<float>(acc) / static_cast<float>(n));
  }
}

template <typename T>
bool same(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0 || num(a) == num(b);
}

// --- Who is in a scope, from the job's layout. ---

std::vector<int> members_of(const std::vector<WorldInfo>& worlds, int g, Scope scope) {
  std::vector<int> members;
  const WorldInfo& me = worlds[g];
  for (const WorldInfo& w : worlds) {
    if (scope == Scope::kGlobal || (scope == Scope::kLocal && w.host_index == me.host_index) ||
        (scope == Scope::kCross && w.local_rank == me.local_rank)) {
      members.push_back(w.rank);
    }
  }
  // Ordered by rank within the scope (Horovod's numbering).
  std::sort(members.begin(), members.end(), [&](int a, int b) {
    if (scope == Scope::kLocal) return worlds[a].local_rank < worlds[b].local_rank;
    if (scope == Scope::kCross) return worlds[a].cross_rank < worlds[b].cross_rank;
    return a < b;
  });
  return members;
}

[[noreturn]] void mismatch(const std::string& what) { throw std::runtime_error(what); }

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kProduct};

// --- One collective at a time, for element type T. ---

template <typename T>
void check_allreduce(Runtime& rt, const std::vector<WorldInfo>& worlds, int g, Scope scope,
                     std::size_t count) {
  const auto members = members_of(worlds, g, scope);
  const DataType type = hora::dtype_of<T>();
  for (ReduceOp op : kOps) {
    for (bool in_place : {false, true}) {
      std::vector<T> send(count), recv(count, make<T>(99));
      for (std::size_t i = 0; i < count; ++i) send[i] = make<T>(input<T>(g, i, op));
      const std::vector<T> original = send;
      if (in_place) {
        rt.allreduce(send.data(), send.data(), count, type, op, scope);
        recv = send;
      } else {
        rt.allreduce(send.data(), recv.data(), count, type, op, scope);
        for (std::size_t i = 0; i < count; ++i) {
          if (!same(send[i], original[i])) mismatch("allreduce modified its send buffer");
        }
      }
      for (std::size_t i = 0; i < count; ++i) {
        const T want = reference<T>(members, i, op);
        if (!same(recv[i], want)) {
          mismatch(fmt::format("allreduce {} {} {} count {} {}: element {} is {}, expected {}",
                               hora::name_of(scope), hora::name_of(type), hora::name_of(op), count,
                               in_place ? "in place" : "out of place", i, num(recv[i]), num(want)));
        }
      }
    }
  }
}

template <typename T>
void check_reducescatter(Runtime& rt, const std::vector<WorldInfo>& worlds, int g, Scope scope,
                         std::size_t count) {
  const auto members = members_of(worlds, g, scope);
  const int n = static_cast<int>(members.size());
  const int me = rt.rank(scope);
  const DataType type = hora::dtype_of<T>();
  std::size_t offset = 0;
  for (int r = 0; r < me; ++r) offset += hora::reducescatter_count(count, r, n);
  const std::size_t mine = hora::reducescatter_count(count, me, n);
  for (ReduceOp op : kOps) {
    std::vector<T> send(count);
    for (std::size_t i = 0; i < count; ++i) send[i] = make<T>(input<T>(g, i, op));
    std::vector<T> recv(mine + 1, make<T>(99));  // one guard element past the block
    rt.reducescatter(send.data(), count, recv.data(), type, op, scope);
    for (std::size_t i = 0; i < mine; ++i) {
      const T want = reference<T>(members, offset + i, op);
      if (!same(recv[i], want)) {
        mismatch(
            fmt::format("reducescatter {} {} {} count {}: element {} of rank {}'s block is "
                        "{}, expected {}",
                        hora::name_of(scope), hora::name_of(type), hora::name_of(op), count, i, me,
                        num(recv[i]), num(want)));
      }
    }
    if (!same(recv[mine], make<T>(99))) mismatch("reducescatter wrote past its block");
  }
}

template <typename T>
void check_allgather(Runtime& rt, const std::vector<WorldInfo>& worlds, int g, Scope scope) {
  const auto members = members_of(worlds, g, scope);
  const int n = static_cast<int>(members.size());
  const int me = rt.rank(scope);
  const DataType type = hora::dtype_of<T>();
  auto count_of = [](int scope_rank) { return static_cast<std::size_t>(scope_rank % 3); };
  auto value = [](int global, std::size_t i) {
    return make<T>(global * 10 + static_cast<double>(i));
  };

  const auto counts = rt.allgather_counts(count_of(me), scope);
  for (int r = 0; r < n; ++r) {
    if (counts.at(r) != count_of(r)) mismatch("allgather_counts returned a wrong count");
  }
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  std::vector<T> send(count_of(me));
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = value(g, i);

  for (bool in_place : {false, true}) {
    std::vector<T> recv(std::max<std::size_t>(total, 1), make<T>(99));
    if (in_place) {
      std::size_t offset = 0;
      for (int r = 0; r < me; ++r) offset += counts[r];
      std::copy(send.begin(), send.end(), recv.begin() + static_cast<std::ptrdiff_t>(offset));
      rt.allgather(recv.data() + offset, send.size(), recv.data(), counts, type, scope);
    } else {
      rt.allgather(send.data(), send.size(), recv.data(), counts, type, scope);
    }
    std::size_t at = 0;
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < counts[r]; ++i, ++at) {
        if (!same(recv[at], value(members[r], i))) {
          mismatch(fmt::format("allgather {} {} {}: element {} of rank {} is {}, expected {}",
                               hora::name_of(scope), hora::name_of(type),
                               in_place ? "in place" : "out of place", i, r, num(recv[at]),
                               num(value(members[r], i))));
        }
      }
    }
  }
}

template <typename T>
void check_broadcast(Runtime& rt, const std::vector<WorldInfo>& worlds, int g, Scope scope) {
  const auto members = members_of(worlds, g, scope);
  const int n = static_cast<int>(members.size());
  const int me = rt.rank(scope);
  const DataType type = hora::dtype_of<T>();
  const std::size_t count = 11;
  for (int root = 0; root < n; ++root) {
    std::vector<T> buffer(count);
    for (std::size_t i = 0; i < count; ++i) {
      buffer[i] = make<T>(me == root ? root * 20 + static_cast<double>(i) : 99);
    }
    rt.broadcast(buffer.data(), count, type, root, scope);
    for (std::size_t i = 0; i < count; ++i) {
      if (!same(buffer[i], make<T>(root * 20 + static_cast<double>(i)))) {
        mismatch(fmt::format("broadcast {} {} from root {}: element {} is {}", hora::name_of(scope),
                             hora::name_of(type), root, i, num(buffer[i])));
      }
    }
  }
}

template <typename T>
void check_alltoall(Runtime& rt, const std::vector<WorldInfo>& worlds, int g, Scope scope) {
  const auto members = members_of(worlds, g, scope);
  const int n = static_cast<int>(members.size());
  const int me = rt.rank(scope);
  const DataType type = hora::dtype_of<T>();
  auto split = [](int from, int to) { return static_cast<std::size_t>((from + to) % 3); };
  auto value = [](int from, int to, std::size_t k) {
    return make<T>(from * 16 + to * 4 + static_cast<double>(k % 4));
  };

  std::vector<std::size_t> send_splits(static_cast<std::size_t>(n));
  std::vector<T> send;
  for (int to = 0; to < n; ++to) {
    send_splits[to] = split(me, to);
    for (std::size_t k = 0; k < send_splits[to]; ++k) send.push_back(value(me, to, k));
  }
  const auto recv_splits = rt.alltoall_splits(send_splits, scope);
  for (int from = 0; from < n; ++from) {
    if (recv_splits.at(from) != split(from, me)) mismatch("alltoall_splits returned a wrong split");
  }
  const std::size_t total = std::accumulate(recv_splits.begin(), recv_splits.end(), std::size_t{0});
  std::vector<T> recv(std::max<std::size_t>(total, 1), make<T>(99));
  rt.alltoall(send.data(), send_splits, recv.data(), recv_splits, type, scope);
  std::size_t at = 0;
  for (int from = 0; from < n; ++from) {
    for (std::size_t k = 0; k < recv_splits[from]; ++k, ++at) {
      if (!same(recv[at], value(from, me, k))) {
        mismatch(fmt::format("alltoall {} {}: element {} from rank {} is {}, expected {}",
                             hora::name_of(scope), hora::name_of(type), k, from, num(recv[at]),
                             num(value(from, me, k))));
      }
    }
  }
  // In place: the same buffer for input and output (the runtime stages the input).
  if (send.size() == total) {
    std::vector<T> buffer = send;
    buffer.resize(std::max<std::size_t>(total, 1));
    rt.alltoall(buffer.data(), send_splits, buffer.data(), recv_splits, type, scope);
    for (std::size_t i = 0; i < total; ++i) {
      if (!same(buffer[i], recv[i])) mismatch("alltoall in place differs from out of place");
    }
  }
}

template <typename T>
void check_all(Runtime& rt, const std::vector<WorldInfo>& worlds, int g, Scope scope) {
  check_allreduce<T>(rt, worlds, g, scope, 13);
  check_allreduce<T>(rt, worlds, g, scope, 1);
  check_reducescatter<T>(rt, worlds, g, scope, 13);
  check_reducescatter<T>(rt, worlds, g, scope, 2);  // fewer elements than ranks: empty blocks
  check_allgather<T>(rt, worlds, g, scope);
  check_broadcast<T>(rt, worlds, g, scope);
  check_alltoall<T>(rt, worlds, g, scope);
}

void check_every_type(Runtime& rt, const std::vector<WorldInfo>& worlds, int g, Scope scope) {
  check_all<std::uint8_t>(rt, worlds, g, scope);
  check_all<std::int8_t>(rt, worlds, g, scope);
  check_all<std::int32_t>(rt, worlds, g, scope);
  check_all<std::int64_t>(rt, worlds, g, scope);
  check_all<hora::float16>(rt, worlds, g, scope);
  check_all<hora::bfloat16>(rt, worlds, g, scope);
  check_all<float>(rt, worlds, g, scope);
  check_all<double>(rt, worlds, g, scope);
}

// A barrier lets nobody through before everyone of its scope arrived.
void check_barrier(Runtime& rt, std::vector<std::atomic<int>>& arrived, int n, Scope scope) {
  for (std::size_t phase = 0; phase < arrived.size(); ++phase) {
    arrived[phase].fetch_add(1);
    rt.barrier(scope);
    if (arrived[phase].load() < n) {
      mismatch(
          fmt::format("barrier phase {} let rank {} through with only {} of {} ranks "
                      "arrived",
                      phase, rt.rank(Scope::kGlobal), arrived[phase].load(), n));
    }
  }
}

// shm: shared memory between the ranks of a host (HORA_SHM); hierarchical: -1 by layout, 0 off,
// 1 forced (HORA_HIERARCHICAL_ALLREDUCE).
void run_everything(const std::vector<int>& hosts, bool shm = true, int hierarchical = -1) {
  hora::test::TestServer server(static_cast<int>(hosts.size()));
  auto worlds = hora::test::make_worlds(hosts, server, std::chrono::seconds(20));
  for (auto& w : worlds) {
    w.shm = shm;
    w.hierarchical_allreduce = hierarchical;
  }
  const int n = static_cast<int>(hosts.size());
  std::vector<std::atomic<int>> arrived(4);
  for (auto& a : arrived) a = 0;
  const auto results = hora::test::run_job(worlds, [&](Runtime& rt, const WorldInfo& world) {
    if (rt.size(Scope::kGlobal) != n || rt.rank(Scope::kGlobal) != world.rank) {
      mismatch("rank/size do not match the world");
    }
    for (Scope scope : {Scope::kGlobal, Scope::kLocal, Scope::kCross}) {
      check_every_type(rt, worlds, world.rank, scope);
    }
    // A buffer larger than Gloo's 1 MiB segment.
    check_allreduce<float>(rt, worlds, world.rank, Scope::kGlobal, 300000);
    // Blocks of several 1 MiB segments with a remainder: hora's pipelined ring on Gloo
    // (ring_allreduce.h) walks segments and uneven blocks. Only where Gloo carries it.
    if (!shm) check_allreduce<double>(rt, worlds, world.rank, Scope::kGlobal, 700001);
    check_reducescatter<float>(rt, worlds, world.rank, Scope::kGlobal, 300001);
    check_barrier(rt, arrived, n, Scope::kGlobal);
  });
  for (std::size_t r = 0; r < results.size(); ++r) {
    INFO("rank " << r);
    CHECK(hora::test::message_of(results[r].error) == "");
  }
}

}  // namespace

TEST_CASE("every collective, type and op on one host", "[collectives]") {
  const int n = GENERATE(1, 2, 3, 4);
  const bool shm = GENERATE(true, false);
  INFO("world size " << n << (shm ? ", shared memory" : ", Gloo only"));
  run_everything(hora::test::one_host(n), shm);
}

TEST_CASE("local and cross scopes on a fake two-host layout", "[collectives][scopes]") {
  // 4 ranks on 2 hosts: local groups {0,1} {2,3}; cross groups {0,2} {1,3}. Global allreduce
  // is hierarchical by default (shared memory, then the cross groups), flat when told so.
  const int hierarchical = GENERATE(-1, 0);
  const bool shm = GENERATE(true, false);
  INFO("hierarchical " << hierarchical << (shm ? ", shared memory" : ", Gloo only"));
  run_everything({0, 0, 1, 1}, shm, hierarchical);
}

TEST_CASE("uneven hosts: a cross group of one rank", "[collectives][scopes]") {
  // 5 ranks: host 0 has ranks 0,1,2; host 1 has 3,4. Cross groups {0,3} {1,4} {2}. Even when
  // forced, allreduce cannot be hierarchical here (the hosts differ): it stays flat.
  const int hierarchical = GENERATE(-1, 1);
  INFO("hierarchical " << hierarchical);
  run_everything({0, 0, 0, 1, 1}, true, hierarchical);
}

TEST_CASE("scope ranks and sizes follow Horovod's layout", "[collectives][scopes]") {
  hora::test::TestServer server(5);
  const auto worlds = hora::test::make_worlds({0, 0, 0, 1, 1}, server, std::chrono::seconds(20));
  std::vector<std::vector<int>> seen(5);
  const auto results = hora::test::run_job(worlds, [&](Runtime& rt, const WorldInfo& world) {
    seen[world.rank] = {rt.rank(Scope::kLocal), rt.size(Scope::kLocal), rt.rank(Scope::kCross),
                        rt.size(Scope::kCross)};
  });
  hora::test::rethrow_first(results);
  CHECK(seen[0] == std::vector<int>{0, 3, 0, 2});
  CHECK(seen[2] == std::vector<int>{2, 3, 0, 1});
  CHECK(seen[3] == std::vector<int>{0, 2, 1, 2});
  CHECK(seen[4] == std::vector<int>{1, 2, 1, 2});
}
