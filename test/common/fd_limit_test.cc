// raise_fd_limit (common/fd_limit.h) on this process's real RLIMIT_NOFILE.
#include "common/fd_limit.h"

#include <sys/resource.h>

#include <string>

#include <catch2/catch.hpp>

TEST_CASE("the soft open-file limit is raised to the hard limit", "[fd_limit]") {
  rlimit rl{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &rl) == 0);
  REQUIRE(rl.rlim_max >= 64);  // room to lower the soft limit below the hard one
  const rlim_t hard = rl.rlim_max;
  rl.rlim_cur = 32;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &rl) == 0);

  const hora::FdLimit got = hora::raise_fd_limit();
  CHECK(got.error.empty());
  CHECK(got.soft_before == 32);
  CHECK(got.soft == hard);
  CHECK(got.hard == hard);
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &rl) == 0);
  CHECK(rl.rlim_cur == hard);

  // Already at the hard limit (`ulimit -n 1024` sets both): nothing raised, and `error` says
  // why, so the launcher's warning about a low limit is not skipped.
  const hora::FdLimit again = hora::raise_fd_limit();
  CHECK(again.soft == hard);
  if (hard != RLIM_INFINITY) {
    CHECK(again.error == "the soft limit is already the hard limit " + std::to_string(hard));
  }
}
