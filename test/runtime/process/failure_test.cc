// Failures a rank must survive without hanging: a peer that vanishes mid-collective, a peer
// that never arrives (timeout), the launcher's abort while a collective is blocked, bad
// arguments, and a rank with the wrong job secret.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <hora/error.h>
#include <hora/hora.h>
#include <catch2/catch.hpp>

#include "test/runtime/test_job.h"

using hora::DataType;
using hora::ReduceOp;
using hora::Scope;
using hora::detail::Runtime;
using hora::detail::WorldInfo;
using hora::test::is;
using namespace std::chrono_literals;

namespace {

int peer_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const hora::PeerFailure& e) {
    return e.peer();
  } catch (...) {
    return -2;
  }
}

}  // namespace

TEST_CASE("a peer that vanishes mid-job makes the others raise, naming it, within the timeout",
          "[failure]") {
  // Over Gloo (HORA_SHM=0) and over shared memory (the default for ranks of one host).
  const bool shm = GENERATE(false, true);
  INFO((shm ? "shared memory" : "Gloo"));
  const auto timeout = 2s;
  hora::test::TestServer server(3);
  auto worlds = hora::test::make_worlds(hora::test::one_host(3), server, timeout);
  for (auto& w : worlds) w.shm = shm;
  const auto results = hora::test::run_job(worlds, [&](Runtime& rt, const WorldInfo& world) {
    std::vector<float> data(1000, 1.0f);
    // One good collective first: the mesh works.
    rt.allreduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum,
                 Scope::kGlobal);
    if (data[0] != 3.0f) throw std::runtime_error("first allreduce gave a wrong sum");
    if (world.rank == 1) {
      rt.close_abruptly();  // what the others see when this process dies
      return;
    }
    rt.allreduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum,
                 Scope::kGlobal);
  });
  CHECK_FALSE(results[1].error);
  for (int r : {0, 2}) {
    INFO("rank " << r << ": " << hora::test::message_of(results[r].error));
    REQUIRE(results[r].error);
    CHECK((is<hora::PeerFailure>(results[r].error) || is<hora::TimeoutError>(results[r].error)));
    // Not a hang. (It takes about `timeout`; a bound near that would break on a loaded machine.)
    CHECK(results[r].elapsed < 10 * timeout);
    CHECK_THAT(hora::test::message_of(results[r].error),
               Catch::Contains("rank " + std::to_string(r) + " on host0") &&
                   Catch::Contains("allreduce of 1000 x float32 (sum)"));
  }
  // Gloo: rank 0 receives from rank 1 in the ring: it sees the connection close and names it.
  // Shared memory: rank 1 marked the group broken; every waiter names it.
  INFO(hora::test::message_of(results[0].error));
  REQUIRE(is<hora::PeerFailure>(results[0].error));
  CHECK(peer_of(results[0].error) == 1);
  CHECK_THAT(hora::test::message_of(results[0].error),
             Catch::Contains(shm ? "peer rank 1 (host0, local rank 1)"
                                 : "peer rank 1 (host0, 127.0.0.1:") &&
                 Catch::Contains("closed the connection (it probably died"));
}

TEST_CASE("a peer that never calls the collective makes the others time out", "[failure]") {
  const auto timeout = 1500ms;
  hora::test::TestServer server(2);
  const auto worlds = hora::test::make_worlds(hora::test::one_host(2), server, timeout);
  std::atomic<bool> rank0_done{false};
  std::string later;  // rank 0's second barrier
  std::chrono::steady_clock::duration later_took{};
  const auto results = hora::test::run_job(worlds, [&](Runtime& rt, const WorldInfo& world) {
    if (world.rank == 1) {
      // Alive (connections open) but busy elsewhere until rank 0 gave up.
      while (!rank0_done.load()) std::this_thread::yield();
      return;
    }
    std::exception_ptr first;
    try {
      rt.barrier(Scope::kGlobal);
    } catch (...) {
      first = std::current_exception();
    }
    rank0_done = true;
    // Gloo closed the scope's connections on the timeout: the next collective fails at once.
    const auto start = std::chrono::steady_clock::now();
    try {
      rt.barrier(Scope::kGlobal);
    } catch (const hora::TimeoutError& e) {
      later = e.what();
    }
    later_took = std::chrono::steady_clock::now() - start;
    if (first) std::rethrow_exception(first);
  });
  INFO(hora::test::message_of(results[0].error));
  REQUIRE(is<hora::TimeoutError>(results[0].error));
  CHECK(results[0].elapsed >= timeout - 100ms);  // it waited for the timeout, not less
  CHECK(results[0].elapsed < 10 * timeout);      // not a hang (it takes about `timeout`)
  CHECK_THAT(hora::test::message_of(results[0].error),
             Catch::Contains("rank 0 on host0: barrier over the global group failed") &&
                 Catch::Contains("HORA_TIMEOUT_SECONDS"));
  // "failed earlier" proves it did not wait for the peer again (that would end in a new timeout
  // message). It takes well under a millisecond; the bound only rules out a second full wait.
  CHECK_THAT(later, Catch::Contains("failed earlier"));
  CHECK(later_took < timeout);
}

TEST_CASE("the launcher's abort makes a blocked collective raise AbortedError at once",
          "[failure][abort]") {
  // Shared memory (one host's default), and Gloo (HORA_SHM=0) on its async pairs, on its sync
  // pairs for small allreduces (HORA_GLOO_SYNC=1: sleeping in recv(2) on a live peer), and on
  // sync pairs that busy-poll.
  const std::string transport = GENERATE("shm", "gloo", "gloo-sync", "gloo-busy");
  INFO(transport);
  const hora::test::ScopedEnv sync("HORA_GLOO_SYNC", transport == "gloo-sync"   ? "1"
                                                     : transport == "gloo-busy" ? "busy"
                                                                                : "0");
  hora::test::TestServer server(3);
  // A long timeout: only the abort can end the wait within the test's bound.
  auto worlds = hora::test::make_worlds(hora::test::one_host(3), server, 60s);
  for (auto& w : worlds) w.shm = transport == "shm";
  std::atomic<pid_t> tids[2] = {0, 0};
  const auto results = hora::test::run_job(worlds, [&](Runtime& rt, const WorldInfo& world) {
    std::vector<std::int32_t> data(64, world.rank);
    if (world.rank == 2) {
      // Rank 2 never joins the allreduce. Once ranks 0 and 1 sleep inside it (blocked on Gloo,
      // or spinning on a socket), the launcher aborts the job.
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      hora::test::threads_settle_in({&tids[0], &tids[1]}, transport == "gloo-busy" ? 'R' : 'S',
                                    deadline);
      server.abort_all("rank 7 on host9 exited with code 3");
      // Later calls on an aborted rank fail at once as well (once the abort reached it).
      while (!rt.aborted() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      rt.barrier(Scope::kGlobal);
      return;
    }
    tids[world.rank] = static_cast<pid_t>(::syscall(SYS_gettid));
    rt.allreduce(data.data(), data.data(), data.size(), DataType::kInt32, ReduceOp::kSum,
                 Scope::kGlobal);
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << hora::test::message_of(results[r].error));
    REQUIRE(is<hora::AbortedError>(results[r].error));
    CHECK_THAT(hora::test::message_of(results[r].error),
               Catch::Contains("job aborted by launcher: rank 7 on host9 exited with code 3"));
    CHECK(results[r].elapsed < 25s);
  }
  CHECK_THAT(hora::test::message_of(results[0].error), Catch::Contains("allreduce of 64 x int32"));
  if (transport == "gloo-sync" || transport == "gloo-busy") {
    CHECK_THAT(hora::test::message_of(results[0].error), Catch::Contains("(sync Gloo pairs"));
  }
  CHECK_THAT(hora::test::message_of(results[2].error), Catch::Contains("barrier"));
}

TEST_CASE("wrong arguments are usage errors naming the argument", "[failure][usage]") {
  hora::test::TestServer server(2);
  const auto worlds = hora::test::make_worlds(hora::test::one_host(2), server, 10s);
  std::vector<std::string> messages[2];
  const auto results = hora::test::run_job(worlds, [&](Runtime& rt, const WorldInfo& world) {
    auto usage = [&](auto&& call) {
      try {
        call();
      } catch (const hora::UsageError& e) {
        messages[world.rank].push_back(e.what());
        return;
      }
      messages[world.rank].push_back("(no UsageError)");
    };
    std::vector<float> buffer(8);
    usage([&] {
      rt.allgather(buffer.data(), 2, buffer.data(), {2, 2, 2}, DataType::kFloat32, Scope::kGlobal);
    });
    usage([&] {
      rt.allgather(buffer.data(), 3, buffer.data(), {2, 2}, DataType::kFloat32, Scope::kGlobal);
    });
    usage([&] { rt.broadcast(buffer.data(), 8, DataType::kFloat32, 2, Scope::kGlobal); });
    usage([&] { rt.broadcast(buffer.data(), 8, DataType::kFloat32, -1, Scope::kGlobal); });
    usage([&] {
      rt.alltoall(buffer.data(), {1}, buffer.data(), {1, 1}, DataType::kFloat32, Scope::kGlobal);
    });
    usage([&] {
      rt.allreduce(nullptr, buffer.data(), 8, DataType::kFloat32, ReduceOp::kSum, Scope::kGlobal);
    });
    usage([&] {
      rt.allreduce(buffer.data(), buffer.data(), 8, static_cast<DataType>(77), ReduceOp::kSum,
                   Scope::kGlobal);
    });
    // Still usable after the usage errors: no collective was started.
    rt.barrier(Scope::kGlobal);
  });
  hora::test::rethrow_first(results);
  for (const auto& m : messages) {
    REQUIRE(m.size() == 7);
    CHECK_THAT(m[0], Catch::Contains("counts has 3 entries") && Catch::Contains("2 ranks"));
    CHECK_THAT(m[1], Catch::Contains("counts[") && Catch::Contains("count = 3"));
    CHECK_THAT(m[2], Catch::Contains("root 2") && Catch::Contains("(0..1)"));
    CHECK_THAT(m[3], Catch::Contains("root -1"));
    CHECK_THAT(m[4], Catch::Contains("send_splits has 1 entries"));
    CHECK_THAT(m[5], Catch::Contains("sendbuf is null"));
    CHECK_THAT(m[6], Catch::Contains("type 77"));
  }
  CHECK_THAT(messages[1][0], Catch::Contains("rank 1 on host0"));
}

TEST_CASE("a rank with the wrong secret is refused with a ConnectionError naming HORA_SECRET",
          "[failure][init]") {
  hora::test::TestServer server(1);
  auto worlds = hora::test::make_worlds(hora::test::one_host(1), server, 5s);
  worlds[0].secret[0] ^= 0xff;
  worlds[0].start_timeout = 5s;
  try {
    Runtime runtime(worlds[0]);
    FAIL("init succeeded with a wrong secret");
  } catch (const hora::ConnectionError& e) {
    CHECK_THAT(e.what(), Catch::Contains("HORA_SECRET") && Catch::Contains("rank 0 on host0"));
    CHECK(e.rank() == 0);
    CHECK(e.host() == "host0");
  }
}

TEST_CASE("init names the rendezvous address when nobody listens there", "[failure][init]") {
  std::uint16_t unused_port = 0;
  {
    // A port that was just free: the server is created and destroyed, nothing listens after.
    hora::test::TestServer server(1);
    unused_port = server.port();
  }
  hora::test::TestServer other(1);
  auto worlds = hora::test::make_worlds(hora::test::one_host(1), other, 5s);
  worlds[0].rendezvous_port = unused_port;
  worlds[0].start_timeout = 1s;
  const auto start = std::chrono::steady_clock::now();
  try {
    Runtime runtime(worlds[0]);
    FAIL("init succeeded without a server");
  } catch (const hora::Error& e) {
    CHECK((dynamic_cast<const hora::ConnectionError*>(&e) != nullptr ||
           dynamic_cast<const hora::TimeoutError*>(&e) != nullptr));
    CHECK_THAT(e.what(), Catch::Contains("127.0.0.1:" + std::to_string(unused_port)));
  }
  CHECK(std::chrono::steady_clock::now() - start < 10s);
}

TEST_CASE("the launcher's abort interrupts init() while it waits for the other ranks",
          "[failure][abort][init]") {
  hora::test::TestServer server(2);
  const auto worlds = hora::test::make_worlds(hora::test::one_host(2), server, 30s);
  std::exception_ptr error;
  const auto start = std::chrono::steady_clock::now();
  std::thread rank0([&] {
    try {
      Runtime runtime(worlds[0]);  // rank 1 never comes: init() waits in the address exchange
    } catch (...) {
      error = std::current_exception();
    }
  });
  const auto deadline = start + 20s;
  while (server.waits() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  server.abort_all("horarun was interrupted (SIGINT)");
  rank0.join();
  INFO(hora::test::message_of(error));
  REQUIRE(is<hora::AbortedError>(error));
  CHECK_THAT(hora::test::message_of(error),
             Catch::Contains("rank 0 on host0: init()") &&
                 Catch::Contains("job aborted by launcher: horarun was interrupted (SIGINT)"));
  CHECK(std::chrono::steady_clock::now() - start < 25s);
}

TEST_CASE("ranks whose launcher layouts disagree fail init() with a MismatchError",
          "[failure][init]") {
  hora::test::TestServer server(2);
  auto worlds = hora::test::make_worlds(hora::test::one_host(2), server, 10s);
  worlds[1].local_rank = 0;  // both ranks of host 0 claim local rank 0
  const auto results = hora::test::run_job(worlds, [](Runtime&, const WorldInfo&) {});
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << hora::test::message_of(results[r].error));
    REQUIRE(is<hora::MismatchError>(results[r].error));
    CHECK_THAT(hora::test::message_of(results[r].error),
               Catch::Contains("local group is inconsistent") &&
                   Catch::Contains("HORA_LOCAL_RANK=0, already taken by rank 0"));
  }
}
