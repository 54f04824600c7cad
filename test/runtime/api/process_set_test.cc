// Process sets (<hora/process_set.h>) in real horarun jobs on this host, -np 1 to 4, with shared
// memory on (a set on one host gets shared-memory groups of its own) and off (Gloo contexts of its
// own): process_set_child checks every collective on overlapping and disjoint sets against a
// computation of the members' inputs, and the refusals. HORARUN and PSET_CHILD come from the
// environment (test/runtime/meson.build).
#include <string>

#include <catch2/catch.hpp>

#include "test/run_job.h"

using hora::test::count_of;
using hora::test::required_env;

namespace {

void run_sets(int np, const char* shm) {
  const hora::test::JobResult r =
      hora::test::run_job({required_env("HORARUN"), "-np", std::to_string(np), "-H",
                           "localhost:" + std::to_string(np), required_env("PSET_CHILD")},
                          {{"HORA_SHM", shm}, {"HORA_TIMEOUT_SECONDS", "60"}},
                          std::chrono::seconds(150));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(count_of(r.output, "PSET_FAIL") == 0);
  CHECK(count_of(r.output, "PSET_OK") == np);
}

}  // namespace

TEST_CASE("process sets at -np 1 to 4 on shared memory", "[integration]") {
  for (int np = 1; np <= 4; ++np) {
    SECTION("np " + std::to_string(np)) { run_sets(np, "1"); }
  }
}

TEST_CASE("process sets at -np 2 to 4 on Gloo", "[integration]") {
  for (int np = 2; np <= 4; ++np) {
    SECTION("np " + std::to_string(np)) { run_sets(np, "0"); }
  }
}
