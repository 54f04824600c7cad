// The NCCL unique-id exchange, against a real rendezvous server on 127.0.0.1 (port 0, read
// back) and one real client per simulated rank. The id comes from a fake get_unique_id, so no GPU
// or NCCL call is involved and this runs everywhere.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <hora/error.h>

#include "rendezvous/client.h"
#include "rendezvous/server.h"
#include "runtime/nccl/unique_id.h"
#include "test/support/test_server.h"

namespace nccl = hora::detail::nccl;
using hora::Scope;
using hora::detail::WorldInfo;
using namespace std::chrono_literals;

namespace {

constexpr auto kLongDeadline = 20s;  // never reached when the test passes

using hora::test::TestServer;

// Rank r of a job of `size` ranks on `hosts` hosts with size / hosts ranks each, filled in order
// (horarun's rank table).
WorldInfo world_of(int rank, int size, int hosts) {
  const int per_host = size / hosts;
  WorldInfo w;
  w.rank = rank;
  w.size = size;
  w.local_rank = rank % per_host;
  w.local_size = per_host;
  w.host_index = rank / per_host;
  w.cross_rank = rank / per_host;
  w.cross_size = hosts;
  w.hostname = "host" + std::to_string(w.host_index);
  w.rendezvous_host = "127.0.0.1";
  return w;
}

nccl::UniqueId id_with(std::uint8_t seed) {
  nccl::UniqueId id;
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(seed + i);
  return id;
}

std::chrono::steady_clock::time_point in(std::chrono::milliseconds d) {
  return std::chrono::steady_clock::now() + d;
}

}  // namespace

TEST_CASE("comm_group places a rank in its global, local and cross communicator") {
  // Rank 5 of 8 on 2 hosts x 4: local rank 1 on host 1; cross rank 1 of 2.
  WorldInfo w = world_of(5, 8, 2);
  nccl::CommGroup g = nccl::comm_group(w, Scope::kGlobal);
  CHECK((g.group == 0 && g.rank == 5 && g.nranks == 8));
  g = nccl::comm_group(w, Scope::kLocal);
  CHECK((g.group == 1 && g.rank == 1 && g.nranks == 4));
  g = nccl::comm_group(w, Scope::kCross);
  CHECK((g.group == 1 && g.rank == 1 && g.nranks == 2));

  CHECK(nccl::unique_id_key(nccl::comm_group(w, Scope::kGlobal)) == "nccl/global/0/uid");
  CHECK(nccl::unique_id_key(nccl::comm_group(w, Scope::kLocal)) == "nccl/local/1/uid");
  CHECK(nccl::unique_id_key(nccl::comm_group(w, Scope::kCross)) == "nccl/cross/1/uid");
  CHECK(nccl::describe(nccl::comm_group(w, Scope::kLocal)) ==
        "the local communicator of host #1 (4 ranks)");
  CHECK(nccl::sized_who(w) == "rank 5 of 8 on host1");
}

TEST_CASE("a communicator of one rank makes its own id without a rendezvous") {
  WorldInfo w;  // a world of one
  int calls = 0;
  nccl::UniqueId got = nccl::exchange_unique_id(
      nullptr, w, nccl::comm_group(w, Scope::kGlobal),
      [&] {
        ++calls;
        return id_with(42);
      },
      in(1s));
  CHECK(calls == 1);
  CHECK(got == id_with(42));
}

TEST_CASE("every rank of the global communicator gets rank 0's id; only rank 0 makes one") {
  const int size = GENERATE(2, 3, 4, 8);
  INFO("size " << size);
  TestServer server(size);
  std::atomic<int> calls{0};
  std::vector<std::future<nccl::UniqueId>> results;
  for (int r = 0; r < size; ++r) {
    results.push_back(std::async(std::launch::async, [&, r] {
      auto client = server.connect(r);
      WorldInfo w = world_of(r, size, 1);
      return nccl::exchange_unique_id(
          client.get(), w, nccl::comm_group(w, Scope::kGlobal),
          [&, r] {
            calls.fetch_add(1);
            return id_with(static_cast<std::uint8_t>(100 + r));
          },
          in(kLongDeadline));
    }));
  }
  for (auto& f : results) CHECK(f.get() == id_with(100));
  CHECK(calls.load() == 1);
}

TEST_CASE("local and cross communicators of different groups get different ids") {
  // 3 hosts x 2 ranks: local groups are hosts 0..2, cross groups are local ranks 0..1. Each
  // group's root makes an id derived from its global rank, so ids show who published them.
  const int size = 6, hosts = 3;
  TestServer server(size);
  const Scope scope = GENERATE(Scope::kLocal, Scope::kCross);
  INFO("scope " << hora::name_of(scope));
  std::vector<std::future<std::pair<int, nccl::UniqueId>>> results;
  for (int r = 0; r < size; ++r) {
    results.push_back(std::async(std::launch::async, [&, r] {
      auto client = server.connect(r);
      WorldInfo w = world_of(r, size, hosts);
      nccl::CommGroup g = nccl::comm_group(w, scope);
      nccl::UniqueId id = nccl::exchange_unique_id(
          client.get(), w, g, [r] { return id_with(static_cast<std::uint8_t>(r)); },
          in(kLongDeadline));
      return std::make_pair(g.group, id);
    }));
  }
  std::set<nccl::UniqueId> distinct;
  for (int r = 0; r < size; ++r) {
    auto [group, id] = results[static_cast<std::size_t>(r)].get();
    // The root of a local group is local rank 0 of its host (global rank 2 * host); the root
    // of a cross group is the rank with that local rank on host 0 (global rank = local rank).
    const int root = scope == Scope::kLocal ? group * 2 : group;
    CHECK(id == id_with(static_cast<std::uint8_t>(root)));
    distinct.insert(id);
  }
  CHECK(distinct.size() == (scope == Scope::kLocal ? 3u : 2u));
}

TEST_CASE("ranks that ask before rank 0 publishes wait for it; late ranks find it stored") {
  TestServer server(3);
  auto c0 = server.connect(0);
  auto c1 = server.connect(1);
  auto c2 = server.connect(2);
  std::promise<void> waiter_started;
  auto early = std::async(std::launch::async, [&] {
    WorldInfo w = world_of(1, 3, 1);
    waiter_started.set_value();
    return nccl::exchange_unique_id(
        c1.get(), w, nccl::comm_group(w, Scope::kGlobal), [] { return id_with(1); },
        in(kLongDeadline));
  });
  waiter_started.get_future().wait();
  WorldInfo w0 = world_of(0, 3, 1);
  CHECK(nccl::exchange_unique_id(
            c0.get(), w0, nccl::comm_group(w0, Scope::kGlobal), [] { return id_with(7); },
            in(kLongDeadline)) == id_with(7));
  CHECK(early.get() == id_with(7));
  WorldInfo w2 = world_of(2, 3, 1);
  CHECK(nccl::exchange_unique_id(
            c2.get(), w2, nccl::comm_group(w2, Scope::kGlobal), [] { return id_with(2); },
            in(kLongDeadline)) == id_with(7));
}

TEST_CASE("a rank whose root never publishes times out at its deadline, naming the key") {
  TestServer server(2);
  auto c1 = server.connect(1);
  WorldInfo w = world_of(1, 2, 2);  // 2 hosts x 1: rank 1 is local rank 0 of host 1, cross rank 1
  const auto deadline = 400ms;
  const auto start = std::chrono::steady_clock::now();
  try {
    nccl::exchange_unique_id(
        c1.get(), w, nccl::comm_group(w, Scope::kCross), [] { return id_with(0); }, in(deadline));
    FAIL("exchange_unique_id returned without the root");
  } catch (const hora::TimeoutError& e) {
    std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("rank 1 of 2 on host1"));
    CHECK_THAT(msg, Catch::Contains("nccl/cross/0/uid"));
    CHECK_THAT(msg, Catch::Contains("the cross communicator of local rank 0 (2 ranks)"));
    CHECK_THAT(msg, Catch::Contains("local rank 0 of the first host"));
    CHECK_THAT(msg, Catch::Contains("HORA_TIMEOUT_SECONDS"));
    CHECK(e.rank() == 1);
    CHECK(e.host() == "host1");
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= deadline - 50ms);  // waited for the deadline, not less...
  CHECK(elapsed < 10s);               // ...and did not hang
}

TEST_CASE("a stored value that is not 128 bytes is a mismatch") {
  TestServer server(2);
  auto c0 = server.connect(0);
  auto c1 = server.connect(1);
  c0->set("nccl/global/0/uid", hora::rdv::Bytes(5, 1), 5s);
  WorldInfo w = world_of(1, 2, 1);
  try {
    nccl::exchange_unique_id(
        c1.get(), w, nccl::comm_group(w, Scope::kGlobal), [] { return id_with(0); },
        in(kLongDeadline));
    FAIL("a 5-byte id was accepted");
  } catch (const hora::MismatchError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("holds 5 bytes, expected 128"));
  }
}

TEST_CASE("the launcher's abort ends a rank waiting for the id, with the launcher's reason") {
  TestServer server(2);
  auto c1 = server.connect(1);
  WorldInfo w = world_of(1, 2, 1);
  auto waiting = std::async(std::launch::async, [&] {
    return nccl::exchange_unique_id(
        c1.get(), w, nccl::comm_group(w, Scope::kGlobal), [] { return id_with(0); },
        in(kLongDeadline));
  });
  server.server().abort_all("rank 0 on host0 exited with code 3");
  const auto start = std::chrono::steady_clock::now();
  try {
    waiting.get();
    FAIL("exchange_unique_id returned after the abort");
  } catch (const hora::AbortedError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("rank 0 on host0 exited with code 3"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("nccl/global/0/uid"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 10s);
}

TEST_CASE("without a rendezvous client a communicator of several ranks is a usage error") {
  WorldInfo w = world_of(1, 2, 1);
  CHECK_THROWS_AS(nccl::exchange_unique_id(
                      nullptr, w, nccl::comm_group(w, Scope::kGlobal), [] { return id_with(0); },
                      in(1s)),
                  hora::UsageError);
}
