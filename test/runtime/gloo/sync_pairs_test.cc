// Gloo's sync pairs for small allreduces (runtime/gloo/sync_policy.h) inside one test process:
// ranks are threads on real sockets, with shared memory off so that Gloo carries their
// allreduces and build_mesh() makes the sync twins: a silent peer is a TimeoutError that names
// it, and allreduces above the threshold stay on the async pairs. Below the backend,
// MeshContext::fail() ends a sync read even when the peer keeps its connection open (the reader
// holds the pair's lock in recv(2): only shutting the socket down wakes it). The launcher's
// abort of a blocked sync allreduce: failure_test.cc. Real jobs: test/integration/
// gloo_sync_test.sh.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gloo/common/error.h>
#include <hora/error.h>
#include <catch2/catch.hpp>

#include "runtime/core/reduce.h"
#include "runtime/gloo/device.h"
#include "runtime/gloo/mesh_context.h"
#include "runtime/gloo/pair_swap.h"
#include "runtime/gloo/sync_allreduce.h"
#include "test/runtime/test_job.h"

using hora::DataType;
using hora::ReduceOp;
using hora::Scope;
using hora::detail::Runtime;
using hora::detail::WorldInfo;
using hora::test::is;
using namespace std::chrono_literals;

namespace {

std::vector<WorldInfo> gloo_worlds(int n, const hora::test::TestServer& server,
                                   std::chrono::milliseconds timeout) {
  auto worlds = hora::test::make_worlds(hora::test::one_host(n), server, timeout);
  for (auto& w : worlds) w.shm = false;
  return worlds;
}

}  // namespace

TEST_CASE("a peer that never calls a sync allreduce is a TimeoutError naming it",
          "[sync_pairs][timeout]") {
  const hora::test::ScopedEnv sync("HORA_GLOO_SYNC", "1");
  const auto timeout = 1500ms;
  hora::test::TestServer server(2);
  const auto worlds = gloo_worlds(2, server, timeout);
  std::atomic<bool> rank0_done{false};
  const auto results = hora::test::run_job(worlds, [&](Runtime& rt, const WorldInfo& world) {
    if (world.rank == 1) {
      while (!rank0_done.load()) std::this_thread::yield();  // alive, connections open
      return;
    }
    std::vector<float> data(3, 1.0f);
    try {
      rt.allreduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum,
                   Scope::kGlobal);
    } catch (...) {
      rank0_done = true;
      throw;
    }
    rank0_done = true;
  });
  INFO(hora::test::message_of(results[0].error));
  REQUIRE(is<hora::TimeoutError>(results[0].error));
  CHECK(results[0].elapsed >= timeout - 100ms);  // it waited for the timeout, not less
  CHECK(results[0].elapsed < 10 * timeout);      // not a hang
  CHECK_THAT(hora::test::message_of(results[0].error),
             Catch::Contains("rank 0 on host0: allreduce of 3 x float32 (sum) over the global "
                             "group (sync Gloo pairs") &&
                 Catch::Contains("no progress for 1.5 s from rank 1 (host0, 127.0.0.1:") &&
                 Catch::Contains("HORA_TIMEOUT_SECONDS"));
}

// In a group of 3 or more; a group of 2 takes every size on its sync pairs (below).
TEST_CASE("allreduces above HORA_GLOO_SYNC_BYTES stay on the async pairs, below it go sync",
          "[sync_pairs]") {
  const hora::test::ScopedEnv sync("HORA_GLOO_SYNC", "1");
  const hora::test::ScopedEnv bytes("HORA_GLOO_SYNC_BYTES", "16");
  hora::test::TestServer server(3);
  const auto worlds = gloo_worlds(3, server, 1500ms);
  std::atomic<bool> rank0_done{false};
  std::vector<std::string> messages(2);
  const auto results = hora::test::run_job(worlds, [&](Runtime& rt, const WorldInfo& world) {
    if (world.rank != 0) {
      while (!rank0_done.load()) std::this_thread::yield();
      return;
    }
    // Ranks 1 and 2 never join: the first call times out and breaks the scope, the second fails
    // at once; each message says where the call was routed.
    for (std::size_t count : {17u, 16u}) {
      std::vector<std::uint8_t> data(count, 1);
      try {
        rt.allreduce(data.data(), data.data(), data.size(), DataType::kUInt8, ReduceOp::kSum,
                     Scope::kGlobal);
      } catch (const hora::Error& e) {
        messages[count == 17 ? 0 : 1] = e.what();
      }
    }
    rank0_done = true;
  });
  INFO(messages[0] << "\n" << messages[1]);
  CHECK_THAT(messages[0], Catch::Contains("allreduce of 17 x uint8 (sum) over the global group "
                                          "failed"));
  CHECK_THAT(messages[1], Catch::Contains("allreduce of 16 x uint8 (sum) over the global group "
                                          "(sync Gloo pairs"));
}

// A group of 2 swaps buffers of any size on its sync pairs (pair_swap.h): sizes below and above
// pair_swap's threshold and of every kind of remainder, every rank holding the same sum; a rank
// whose count differs gets MismatchError on both sides (the checks are swapped before the data),
// not a hang (a mismatch breaks the scope, as on the smaller sizes: it is the last call here).
TEST_CASE("a group of 2 swaps large allreduces on its sync pairs", "[sync_pairs]") {
  const hora::test::ScopedEnv sync("HORA_GLOO_SYNC", "1");
  const hora::test::ScopedEnv bytes("HORA_GLOO_SYNC_BYTES", "1024");
  hora::test::TestServer server(2);
  const auto worlds = gloo_worlds(2, server, 10s);
  const std::vector<std::size_t> counts = {100, 16384, 16385, 270000, 600001};
  std::vector<std::string> mismatch(2);
  const auto results = hora::test::run_job(worlds, [&](Runtime& rt, const WorldInfo& world) {
    for (std::size_t count : counts) {
      // Values whose float sums are exact: rank r holds i % 1000 + r.
      std::vector<float> data(count);
      for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<float>(i % 1000 + world.rank);
      rt.allreduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum,
                   Scope::kGlobal);
      for (std::size_t i = 0; i < count; ++i) {
        if (data[i] != static_cast<float>(2 * (i % 1000) + 1)) {
          throw std::runtime_error("count " + std::to_string(count) + ": element " +
                                   std::to_string(i) + " is " + std::to_string(data[i]));
        }
      }
    }
    // Rank 0 passes 300000 elements, rank 1 300001: both above the threshold.
    std::vector<float> data(300000 + static_cast<std::size_t>(world.rank), 1.0f);
    try {
      rt.allreduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum,
                   Scope::kGlobal);
    } catch (const hora::MismatchError& e) {
      mismatch[static_cast<std::size_t>(world.rank)] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << hora::test::message_of(results[r].error));
    CHECK(results[r].error == nullptr);
    CHECK_THAT(mismatch[r], Catch::Contains("300000") && Catch::Contains("300001"));
  }
}

namespace {

// Two one-pair contexts of this process, connected to each other over 127.0.0.1 and switched to
// sync mode, as build_mesh() does for the twins. sync_timeout: make_sync's (pair_swap's wait);
// Gloo's own reads wait 60 s, far beyond any of the tests' waits.
struct SyncPair {
  std::shared_ptr<hora::detail::gloo::MeshContext> contexts[2];

  explicit SyncPair(std::chrono::milliseconds sync_timeout) {
    WorldInfo world;
    world.hostname = "host0";
    auto device = hora::detail::gloo::create_device(world, {"127.0.0.1", "test"});
    for (int r = 0; r < 2; ++r) {
      std::vector<hora::detail::gloo::MeshPeer> members(2);
      contexts[r] = std::make_shared<hora::detail::gloo::MeshContext>(r, members);
      auto transport = device->createContext(r, 2);
      transport->setTimeout(60s);
      transport->createPair(1 - r);
      contexts[r]->attach(device, std::move(transport));
    }
    std::thread other(
        [&] { contexts[1]->transport().getPair(0)->connect(contexts[0]->own_address(1)); });
    contexts[0]->transport().getPair(1)->connect(contexts[1]->own_address(0));
    other.join();
    for (auto& context : contexts) context->record_connected_peers();
    // Both at once: each first swaps its end's address with the other.
    std::thread switching([&] { contexts[1]->make_sync(false, sync_timeout); });
    contexts[0]->make_sync(false, sync_timeout);
    switching.join();
  }
};

// Rank 0 allreduces `count` floats while rank 1 never reads or answers (and keeps its socket
// open); MeshContext::fail() on rank 0 must end the wait, long before the pairs' own timeouts.
void check_fail_ends_a_blocked_allreduce(std::size_t count) {
  SyncPair pair(60s);
  auto& contexts = pair.contexts;
  for (auto& context : contexts) CHECK(context->is_sync());
  std::vector<float> data(count, 1.0f);
  std::vector<unsigned char> inbox;
  std::atomic<pid_t> tid{0};
  auto reader = std::async(std::launch::async, [&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    hora::detail::gloo::sync_allreduce(*contexts[0], data.data(), data.size(), sizeof(float),
                                       hora::detail::reduce_function(DataType::kFloat32,
                                                                     ReduceOp::kSum),
                                       0, inbox);
  });
  REQUIRE(hora::test::threads_settle_in({&tid}, 'S', std::chrono::steady_clock::now() + 20s));

  // fail() must return and end the wait, long before the 60 s timeouts: a fail() that waited
  // for the pair's lock would still be blocked when the 30 s wait below ends.
  auto failing = std::async(std::launch::async, [&] { contexts[0]->fail("test abort"); });
  const bool failed = failing.wait_for(30s) == std::future_status::ready;
  const bool read_ended = reader.wait_for(30s) == std::future_status::ready;
  if (!failed || !read_ended) contexts[1]->fail("test cleanup");  // frees them to end the test
  REQUIRE(failed);
  REQUIRE(read_ended);
  CHECK_THROWS_AS(reader.get(), ::gloo::IoException);
  contexts[1]->fail("test done");
}

}  // namespace

// Gloo's sync read, in recv(2) holding the pair's lock: only shutting the socket down wakes it.
TEST_CASE("MeshContext::fail ends a sync read whose peer stays connected and silent",
          "[sync_pairs][abort]") {
  check_fail_ends_a_blocked_allreduce(4);
}

// pair_swap, in poll(2) with the socket buffers full of its 4 MB: the shutdown wakes it too.
TEST_CASE("MeshContext::fail ends a group of 2's pair swap whose peer stays silent",
          "[sync_pairs][abort]") {
  check_fail_ends_a_blocked_allreduce(1 << 20);
}

// pair_swap's own deadline: no progress for the context's sync timeout is gloo's "Read
// timeout", which GlooBackend::fail turns into a TimeoutError naming the peer.
TEST_CASE("a group of 2's pair swap with a silent peer ends after the sync timeout",
          "[sync_pairs][timeout]") {
  const auto timeout = 1500ms;
  SyncPair pair(timeout);
  std::vector<float> data(1 << 20, 1.0f);
  std::vector<unsigned char> inbox;
  const auto start = std::chrono::steady_clock::now();
  std::string what;
  try {
    hora::detail::gloo::pair_swap(*pair.contexts[0], 1,
                                  reinterpret_cast<unsigned char*>(data.data()), data.size(),
                                  sizeof(float),
                                  hora::detail::reduce_function(DataType::kFloat32, ReduceOp::kSum),
                                  inbox);
  } catch (const ::gloo::IoException& e) {
    what = e.what();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  for (auto& context : pair.contexts) context->fail("test done");
  CHECK_THAT(what, Catch::Contains("Read timeout"));
  CHECK(elapsed >= timeout - 100ms);
  CHECK(elapsed < 10 * timeout);
}
