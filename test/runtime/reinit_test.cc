// hora::shutdown() then hora::init() again, in a real `horarun -np 2` job on this host with
// shared memory on (issue 23): every init() forms new shared-memory segments, which the local
// ranks other than 0 must find through the rendezvous, and none may be left in /dev/shm.
// HORARUN and REINIT_CHILD come from the environment (test/runtime/meson.build sets them).
#include <string>

#include <catch2/catch.hpp>

#include "test/run_job.h"

using hora::test::count_of;
using hora::test::required_env;

TEST_CASE("init, allreduce, shutdown three times at -np 2 with shared memory", "[integration]") {
  // A short start timeout: before the fix the second init() waited for a segment that no longer
  // existed until this ran out.
  const hora::test::JobResult r =
      hora::test::run_job({required_env("HORARUN"), "-np", "2", "-H", "localhost:2",
                           "--start-timeout", "15", required_env("REINIT_CHILD")},
                          {{"HORA_SHM", "1"}}, std::chrono::seconds(120));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    for (int init = 1; init <= 3; ++init) {
      CHECK(count_of(r.output, "rank " + std::to_string(rank) + " init " + std::to_string(init) +
                                   " ok sum " + std::to_string(init * 3)) == 1);
    }
  }
  CHECK(count_of(r.output, "REINIT_OK") == 2);
  CHECK(count_of(r.output, "left in /dev/shm") == 0);
}
