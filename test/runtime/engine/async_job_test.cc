// Integration tests of the async engine inside libhora: real `horarun -np N` jobs of async_job
// (Gloo over loopback TCP, the launcher's rendezvous), checked from their output and timeline.
// HORARUN and ASYNC_JOB come from the environment (test/runtime/engine/meson.build sets them).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test/read_file.h"
#include "test/run_job.h"
#include "test/runtime/engine/json_reader.h"

using hora::test::count_of;
using hora::test::required_env;
using hora::test::slurp;
using Result = hora::test::JobResult;

TEST_CASE("horarun: async collectives in different orders, cache, mismatch and timeline",
          "[integration]") {
  const int np = GENERATE(2, 3);
  const std::string timeline =
      "/tmp/hora_async_job_" + std::to_string(::getpid()) + "_" + std::to_string(np) + ".json";
  Result r =
      hora::test::run_job({required_env("HORARUN"), "-np", std::to_string(np), "-H",
                           "localhost:" + std::to_string(np), required_env("ASYNC_JOB"), "all"},
                          {{"HORA_TIMELINE", timeline}}, std::chrono::seconds(120));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(count_of(r.output, "ASYNC_JOB_OK") == np);
  CHECK(count_of(r.output,
                 "Mismatched allreduce tensor shapes for tensor 'mismatch': rank 0 sent 8 "
                 "elements but rank " +
                     std::to_string(np - 1) + " sent 4") == np);
  hora::test::JsonValue doc = hora::test::parse_json(slurp(timeline));
  std::map<std::string, int> names;
  for (const auto& e : doc.array) names[e.find("name")->string]++;
  CHECK(names["NEGOTIATE_ALLREDUCE"] > 0);
  CHECK(names["MEMCPY_IN_FUSION_BUFFER"] > 0);
  CHECK(names["ALLGATHER"] == 1);
  CHECK(names["ALLTOALL"] == 1);
  std::remove(timeline.c_str());
}

TEST_CASE("horarun: the stall check warns and the stall shutdown fails the orphan op",
          "[integration]") {
  Result r = hora::test::run_job({required_env("HORARUN"), "-np", "2", "-H", "localhost:2",
                                  required_env("ASYNC_JOB"), "orphan"},
                                 {{"HORA_STALL_CHECK_SECONDS", "0.3"},
                                  {"HORA_STALL_SHUTDOWN_SECONDS", "1"}},
                                 std::chrono::seconds(90));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(count_of(r.output, "ASYNC_JOB_OK") == 2);
  CHECK(count_of(r.output, "allreduce 'orphan': missing on rank 1; submitted by rank 0") >= 1);
  CHECK(count_of(r.output,
                 "allreduce 'orphan' was abandoned by the stall check: rank 1 did not submit it") ==
        1);
}

TEST_CASE("horarun: a waiting caller never waits for the engine's tick", "[integration]") {
  // 200 steps with a 60 s cycle time: cycles come only from waits. A wait that triggered a cycle
  // completing nothing (its op finished in the cycle before) used to leave the next step for a
  // whole tick on one rank: about one step in 25, so this run would take minutes. 45 s is more
  // than ten times what it takes under a sanitizer on a loaded 2-core machine.
  const int np = GENERATE(2, 3);
  Result r =
      hora::test::run_job({required_env("HORARUN"), "-np", std::to_string(np), "-H",
                           "localhost:" + std::to_string(np), required_env("ASYNC_JOB"), "steps"},
                          {{"HORA_CYCLE_TIME_MS", "60000"}}, std::chrono::seconds(45));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(count_of(r.output, "ASYNC_JOB_OK") == np);
}

TEST_CASE("horarun: shutdown fails an op still in flight", "[integration]") {
  Result r = hora::test::run_job({required_env("HORARUN"), "-np", "2", "-H", "localhost:2",
                                  required_env("ASYNC_JOB"), "inflight"},
                                 {}, std::chrono::seconds(90));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(count_of(r.output, "INFLIGHT_FAILED rank 0: ") == 1);
  CHECK(count_of(r.output, "hora was shut down before allreduce 'inflight' completed") == 1);
}
