// --bind-to core's share-out of a host's CPUs, and what a bad binding request says. The real
// binding of real ranks is checked by test/integration (case bind-to).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cli/spawn/cpu_binding.h"

using Catch::Matchers::Contains;
using hora::cli::apply_cpu_binding;
using hora::cli::cpus_for_rank;
using hora::cli::format_cpu_list;
using V = std::vector<int>;

TEST_CASE("each local rank gets an equal run of the allowed CPUs") {
  const V eight{0, 1, 2, 3, 4, 5, 6, 7};
  CHECK(cpus_for_rank(eight, 0, 2) == V{0, 1, 2, 3});
  CHECK(cpus_for_rank(eight, 1, 2) == V{4, 5, 6, 7});
  CHECK(cpus_for_rank(eight, 2, 3) == V{4, 5});  // 8 / 3 = 2 each; CPUs 6 and 7 stay unused
  CHECK(cpus_for_rank(eight, 0, 1) == eight);
  // Only the CPUs this process may use (a cpuset), in their order.
  CHECK(cpus_for_rank(V{2, 3, 10, 11}, 1, 2) == V{10, 11});
}

TEST_CASE("more ranks than CPUs share them round-robin, one CPU each") {
  const V two{0, 1};
  CHECK(cpus_for_rank(two, 0, 4) == V{0});
  CHECK(cpus_for_rank(two, 1, 4) == V{1});
  CHECK(cpus_for_rank(two, 2, 4) == V{0});
  CHECK(cpus_for_rank(two, 3, 4) == V{1});
  CHECK(cpus_for_rank(V{5}, 2, 3) == V{5});
}

TEST_CASE("CPU lists print as Linux prints them") {
  CHECK(format_cpu_list(V{0, 1, 2, 3}) == "0-3");
  CHECK(format_cpu_list(V{0, 2, 3, 4, 8}) == "0,2-4,8");
  CHECK(format_cpu_list(V{7}) == "7");
  CHECK(format_cpu_list(V{}).empty());
}

TEST_CASE("no binding asked for binds nothing; a bad request says what to change") {
  CHECK_FALSE(apply_cpu_binding(std::nullopt, std::string("0"), std::string("2")));
  CHECK_FALSE(apply_cpu_binding(std::string("none"), std::string("0"), std::string("2")));
  auto bad = apply_cpu_binding(std::string("socket"), std::string("0"), std::string("2"));
  REQUIRE(bad);
  CHECK_THAT(*bad, Contains("HORA_BIND_TO='socket'") && Contains("core or none"));
  auto no_rank = apply_cpu_binding(std::string("core"), std::nullopt, std::string("2"));
  REQUIRE(no_rank);
  CHECK_THAT(*no_rank, Contains("HORA_LOCAL_RANK"));
  auto out_of_range = apply_cpu_binding(std::string("core"), std::string("2"), std::string("2"));
  REQUIRE(out_of_range);
  CHECK_THAT(*out_of_range, Contains("HORA_LOCAL_SIZE"));
}
