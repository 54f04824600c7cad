// hora::shutdown() then hora::init() again, in real `horarun -np 2` and `-np 3` jobs on this
// host with shared memory on (issues 23 and 28): every init() forms new shared-memory segments,
// which the local ranks other than 0 must find through the rendezvous, and none may be left in
// /dev/shm. HORARUN and REINIT_CHILD come from the environment (test/runtime/meson.build sets
// them).
#include <string>

#include <catch2/catch.hpp>

#include "test/run_job.h"

using hora::test::count_of;
using hora::test::required_env;

namespace {

// Three init()/shutdown() rounds at -np `np`, all on this host, shared memory on.
void reinit_three_times(int np) {
  // A short start timeout: before the fix the second init() waited for a segment that no longer
  // existed until this ran out.
  const std::string slots = "localhost:" + std::to_string(np);
  const hora::test::JobResult r =
      hora::test::run_job({required_env("HORARUN"), "-np", std::to_string(np), "-H", slots,
                           "--start-timeout", "15", required_env("REINIT_CHILD")},
                          {{"HORA_SHM", "1"}}, std::chrono::seconds(120));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  const int ranks_sum = np * (np + 1) / 2;
  for (int rank = 0; rank < np; ++rank) {
    for (int init = 1; init <= 3; ++init) {
      CHECK(count_of(r.output, "rank " + std::to_string(rank) + " init " + std::to_string(init) +
                                   " ok sum " + std::to_string(init * ranks_sum)) == 1);
    }
  }
  CHECK(count_of(r.output, "REINIT_OK") == np);
  CHECK(count_of(r.output, "left in /dev/shm") == 0);
}

}  // namespace

TEST_CASE("init, allreduce, shutdown three times at -np 2 with shared memory", "[integration]") {
  reinit_three_times(2);
}

TEST_CASE("init, allreduce, shutdown three times at -np 3 with shared memory", "[integration]") {
  reinit_three_times(3);
}
