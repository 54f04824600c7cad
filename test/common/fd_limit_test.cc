// raise_fd_limit (common/fd_limit.h) on this process's real RLIMIT_NOFILE.
#include "common/fd_limit.h"

#include <sys/resource.h>

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

  // Already at the hard limit: nothing to do, no error.
  const hora::FdLimit again = hora::raise_fd_limit();
  CHECK(again.error.empty());
  CHECK(again.soft == hard);
}
