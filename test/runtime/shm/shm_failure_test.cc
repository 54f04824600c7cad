// Failures of the shared-memory transport: a rank killed (SIGKILL) in the middle of an
// allreduce, a rank that never arrives, ranks that call different collectives, the launcher's
// abort, a rank that never maps the segment. Nobody hangs, the culprit is named, and nothing is
// left in /dev/shm.
#include <hora/error.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "runtime/shm/segment.h"
#include "runtime/shm/shm_group.h"
#include "test/runtime/shm/shm_job.h"

using hora::DataType;
using hora::ReduceOp;
using hora::detail::shm::ShmGroup;
using hora::detail::shm::ShmOptions;
using namespace std::chrono_literals;

TEST_CASE("a rank killed in the middle of allreduces makes the others fail naming it", "[shm]") {
  const std::string name = hora::test::fresh_segment_name();
  const auto timeout = 10s;  // detection must not rely on it: the check below allows far less
  std::atomic<bool> killed{false};
  const auto outcomes = hora::test::run_forked(
      3, name, 4096, timeout,
      [](ShmGroup& g, int) -> std::string {
        std::vector<float> data(1 << 16, 1.0f);  // 64 chunks of 4 KiB per allreduce
        const auto until = std::chrono::steady_clock::now() + 60s;
        while (std::chrono::steady_clock::now() < until) {
          g.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kMax, "local");
        }
        return "allreduce never failed";
      },
      [&](const std::vector<pid_t>& pids) {
        std::this_thread::sleep_for(500ms);  // the three are deep in their loops by now
        ::kill(pids[1], SIGKILL);
        killed = true;
        // Not reaped until the others reported: they must see it exit while it is a zombie.
      });
  REQUIRE(killed);
  CHECK(WIFSIGNALED(outcomes[1].status));
  for (int r : {0, 2}) {
    INFO("local rank " << r << ": " << outcomes[r].report);
    CHECK(outcomes[r].report.rfind("PeerFailure peer=11:", 0) == 0);
    CHECK_THAT(outcomes[r].report,
               Catch::Contains("rank " + std::to_string(10 + r) +
                               " on host0: allreduce of 65536 "
                               "x float32 (max) over the local group failed") &&
                   Catch::Contains("peer rank 11 (host0, local rank 1, pid " +
                                   std::to_string(outcomes[1].pid) + ") exited"));
    // Found by watching the process, not by the timeout.
    CHECK(outcomes[r].seconds < 0.5 + 10.0);
  }
  CHECK(hora::test::shm_entries(name.substr(1)).empty());
}

TEST_CASE(
    "a rank that never arrives makes the others time out naming it; later calls fail at "
    "once",
    "[shm]") {
  const std::string name = hora::test::fresh_segment_name();
  const auto reports =
      hora::test::run_threads(3, name, 4096, 1500ms, [](ShmGroup& g, int r) -> std::string {
        if (r == 2) {
          std::this_thread::sleep_for(2500ms);  // alive, but elsewhere
          return "";
        }
        std::string first;
        const auto start = std::chrono::steady_clock::now();
        try {
          g.barrier("global");
        } catch (...) {
          first = hora::test::describe_current_exception();
        }
        const auto took = std::chrono::steady_clock::now() - start;
        if (took < 1400ms) first += " [too early]";
        try {
          g.barrier("global");
          first += " [second barrier passed]";
        } catch (...) {
          first += " [then] " + hora::test::describe_current_exception();
        }
        return first;
      });
  for (int r : {0, 1}) {
    INFO(reports[r]);
    CHECK(reports[r].rfind("TimeoutError: rank " + std::to_string(10 + r) +
                               " on host0: barrier over the global group failed: no progress for "
                               "1.5 s",
                           0) == 0);
    CHECK_THAT(reports[r], Catch::Contains("local rank 2 (rank 12)") &&
                               Catch::Contains("HORA_TIMEOUT_SECONDS") &&
                               Catch::Contains("[then] TimeoutError") &&
                               Catch::Contains("failed earlier"));
    CHECK_THAT(reports[r], !Catch::Contains("too early"));
  }
}

TEST_CASE("ranks that pass different counts get MismatchError", "[shm]") {
  const auto reports =
      hora::test::run_threads(2, hora::test::fresh_segment_name(), 4096, 5s,
                              [](ShmGroup& g, int r) -> std::string {
                                std::vector<float> data(100 + r, 1.0f);
                                try {
                                  g.allreduce(data.data(), data.size(), DataType::kFloat32,
                                              ReduceOp::kSum, "local");
                                } catch (...) {
                                  return hora::test::describe_current_exception();
                                }
                                return "no error";
                              });
  for (const auto& report : reports) {
    INFO(report);
    CHECK(report.rfind("MismatchError:", 0) == 0);
    CHECK_THAT(report, Catch::Contains("called a different collective"));
  }
}

TEST_CASE("abort() makes a blocked collective raise AbortedError at once", "[shm]") {
  const std::string name = hora::test::fresh_segment_name();
  std::atomic<ShmGroup*> blocked{nullptr};
  std::thread aborter;
  const auto reports =
      hora::test::run_threads(2, name, 4096, 30s, [&](ShmGroup& g, int r) -> std::string {
        if (r == 1) {
          // Waits for rank 0 to block, then aborts it (the launcher's abort of its rank).
          while (blocked.load() == nullptr) std::this_thread::sleep_for(1ms);
          std::this_thread::sleep_for(200ms);
          blocked.load()->abort("rank 7 failed");
          return "";
        }
        blocked = &g;
        const auto start = std::chrono::steady_clock::now();
        try {
          g.barrier("local");
        } catch (...) {
          const auto took = std::chrono::steady_clock::now() - start;
          return hora::test::describe_current_exception() +
                 (took > 10s ? " [waited for the timeout]" : "");
        }
        return "no error";
      });
  INFO(reports[0]);
  CHECK(reports[0].rfind("AbortedError: rank 10 on host0: barrier over the local group failed: "
                         "job aborted by launcher: rank 7 failed",
                         0) == 0);
  CHECK_THAT(reports[0], !Catch::Contains("waited for the timeout"));
}

TEST_CASE("a rank that never maps the segment: the others time out and unlink it", "[shm]") {
  const std::string name = hora::test::fresh_segment_name();
  std::string report;
  try {
    ShmGroup g(name, hora::test::shm_options(0, 2, 4096, 5s),
               std::chrono::steady_clock::now() + 500ms);
    report = "formed a group of two alone";
  } catch (...) {
    report = hora::test::describe_current_exception();
  }
  INFO(report);
  CHECK(report.rfind("TimeoutError: rank 10 on host0: forming the shared-memory group", 0) == 0);
  CHECK_THAT(report,
             Catch::Contains("local ranks 1 never mapped") && Catch::Contains("HORA_SHM=0"));
  CHECK(hora::test::shm_entries(name.substr(1)).empty());
}
