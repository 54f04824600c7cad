// The async engine's Transport over Gloo (runtime/gloo/engine_transport.h): every call against
// a reference, at world sizes 1 to 4, and concurrently with blocking collectives on the global
// context from another thread of the same rank (the engine thread and the user's thread must
// not share a Gloo context).
#include <atomic>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "runtime/engine/transport.h"
#include "test/runtime/test_job.h"

using hora::DataType;
using hora::ReduceOp;
using hora::Scope;
using hora::detail::Runtime;
using hora::detail::WorldInfo;

namespace {

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

void exercise(hora::detail::engine::Transport& t) {
  const int n = t.size();
  const int me = t.rank();
  expect(me >= 0 && me < n, "rank out of range");

  // Bitwise AND of 64-bit words: bit k of word w survives only if every rank sets it.
  std::vector<std::uint64_t> words = {~0ull, 0ull, ~(1ull << me), 0xffull << (8 * me)};
  t.allreduce_and(words);
  std::uint64_t cleared = 0;
  for (int r = 0; r < n; ++r) cleared |= 1ull << r;
  expect(words[0] == ~0ull, "AND of all-ones");
  expect(words[1] == 0, "AND of zeros");
  expect(words[2] == ~cleared, fmt::format("AND of ~(1<<rank): {:x}", words[2]));
  expect(words[3] == (n == 1 ? 0xffull : 0), "AND of disjoint bytes");

  // Byte blobs of different sizes, one of them empty.
  std::vector<std::uint8_t> mine(static_cast<std::size_t>(me % 3),
                                 static_cast<std::uint8_t>(me + 1));
  const auto all = t.allgather_bytes(mine);
  expect(static_cast<int>(all.size()) == n, "allgather_bytes: one blob per rank");
  for (int r = 0; r < n; ++r) {
    expect(all[r] == std::vector<std::uint8_t>(static_cast<std::size_t>(r % 3),
                                               static_cast<std::uint8_t>(r + 1)),
           fmt::format("allgather_bytes: blob of rank {}", r));
  }

  // Data plane.
  std::vector<std::int32_t> v(10, me + 1), out(10);
  t.allreduce(v.data(), out.data(), v.size(), DataType::kInt32, ReduceOp::kAverage);
  expect(out[9] == (n * (n + 1) / 2) / n, "allreduce average");

  std::vector<std::size_t> counts(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) counts[r] = static_cast<std::size_t>(r + 1);
  std::vector<double> send(counts[me], me * 1.5),
      gathered(std::accumulate(counts.begin(), counts.end(), std::size_t{0}));
  t.allgatherv(send.data(), gathered.data(), counts, DataType::kFloat64);
  std::size_t at = 0;
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < counts[r]; ++i) expect(gathered[at++] == r * 1.5, "allgatherv");
  }

  std::vector<float> b(5, me == n - 1 ? 7.0f : 0.0f);
  t.broadcast(b.data(), b.size(), DataType::kFloat32, n - 1);
  expect(b[4] == 7.0f, "broadcast from the last rank");

  std::vector<std::size_t> ones(static_cast<std::size_t>(n), 1);
  std::vector<std::int64_t> to(static_cast<std::size_t>(n)), from(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) to[r] = me * 100 + r;
  t.alltoallv(to.data(), ones, from.data(), ones, DataType::kInt64);
  for (int r = 0; r < n; ++r) expect(from[r] == r * 100 + me, "alltoallv");

  std::vector<std::int64_t> rs_in(7, me + 1), rs_out(7 / n + 1);
  t.reducescatter(rs_in.data(), rs_out.data(), 7, DataType::kInt64, ReduceOp::kSum);
  const std::size_t block = 7 / n + (static_cast<std::size_t>(me) < 7 % n ? 1 : 0);
  for (std::size_t i = 0; i < block; ++i) expect(rs_out[i] == n * (n + 1) / 2, "reducescatter");
}

}  // namespace

TEST_CASE("the engine transport runs every call on its own Gloo context", "[engine]") {
  const int n = GENERATE(1, 2, 3, 4);
  INFO("world size " << n);
  hora::test::TestServer server(n);
  const auto worlds =
      hora::test::make_worlds(hora::test::one_host(n), server, std::chrono::seconds(20));
  const auto results = hora::test::run_job(worlds, [](Runtime& rt, const WorldInfo&) {
    auto transport = rt.make_engine_transport();
    // The user's thread keeps the global context busy while the "engine thread" works.
    std::exception_ptr user_error;
    std::thread user([&] {
      try {
        std::vector<float> g(1000, 1.0f);
        for (int i = 0; i < 20; ++i) {
          rt.allreduce(g.data(), g.data(), g.size(), DataType::kFloat32, ReduceOp::kMax,
                       Scope::kGlobal);
          rt.barrier(Scope::kGlobal);
        }
        expect(g[0] == 1.0f, "user allreduce");
      } catch (...) {
        user_error = std::current_exception();
      }
    });
    std::exception_ptr engine_error;
    try {
      for (int i = 0; i < 5; ++i) exercise(*transport);
    } catch (...) {
      engine_error = std::current_exception();
    }
    user.join();
    if (engine_error) std::rethrow_exception(engine_error);
    if (user_error) std::rethrow_exception(user_error);
  });
  for (std::size_t r = 0; r < results.size(); ++r) {
    INFO("rank " << r);
    CHECK(hora::test::message_of(results[r].error) == "");
  }
}
