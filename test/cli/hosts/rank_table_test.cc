#include <catch2/catch.hpp>

#include "cli/base/errors.h"
#include "cli/hosts/rank_table.h"

using Catch::Matchers::Contains;
using hora::cli::parse_host_list;
using hora::cli::RankTable;

namespace {
struct Expect {
  int rank, host_index, local_rank, local_size, cross_rank, cross_size;
};

void check_table(const RankTable& t, const std::vector<Expect>& expected) {
  REQUIRE(t.size() == static_cast<int>(expected.size()));
  for (const Expect& e : expected) {
    INFO("rank " << e.rank);
    const auto& r = t.rank(e.rank);
    CHECK(r.rank == e.rank);
    CHECK(r.host_index == e.host_index);
    CHECK(r.local_rank == e.local_rank);
    CHECK(r.local_size == e.local_size);
    CHECK(r.cross_rank == e.cross_rank);
    CHECK(r.cross_size == e.cross_size);
  }
}
}  // namespace

TEST_CASE("rank table: even slots") {
  RankTable t(parse_host_list("a:2,b:2"), 4);
  check_table(t, {{0, 0, 0, 2, 0, 2}, {1, 0, 1, 2, 0, 2}, {2, 1, 0, 2, 1, 2}, {3, 1, 1, 2, 1, 2}});
  CHECK(t.hosts().size() == 2);
}

TEST_CASE("rank table: uneven slots follow Horovod's cross definitions") {
  // a has 3 ranks, b 1, c 2: local rank 0 exists on a, b, c; 1 on a and c; 2 only on a.
  RankTable t(parse_host_list("a:3,b:1,c:2"), 6);
  check_table(t, {
                     {0, 0, 0, 3, 0, 3},
                     {1, 0, 1, 3, 0, 2},
                     {2, 0, 2, 3, 0, 1},
                     {3, 1, 0, 1, 1, 3},
                     {4, 2, 0, 2, 2, 3},
                     {5, 2, 1, 2, 1, 2},
                 });
}

TEST_CASE("rank table: -np below the slots fills in order and drops empty hosts") {
  RankTable t(parse_host_list("a:2,b:4,c:2"), 3);
  REQUIRE(t.hosts().size() == 2);
  CHECK(t.hosts()[0].name == "a");
  CHECK(t.hosts()[0].slots == 2);
  CHECK(t.hosts()[1].name == "b");
  CHECK(t.hosts()[1].slots == 1);  // only the ranks placed there
  check_table(t, {{0, 0, 0, 2, 0, 2}, {1, 0, 1, 2, 0, 1}, {2, 1, 0, 1, 1, 2}});
  CHECK(t.host_of(2).name == "b");
}

TEST_CASE("rank table: -np above the slots names both numbers") {
  CHECK_THROWS_WITH(RankTable(parse_host_list("a:2,b:1"), 5),
                    Contains("-np 5") && Contains("3 on 2 hosts"));
  CHECK_THROWS_AS(RankTable(parse_host_list("a:2"), 0), hora::cli::UsageError);
}

TEST_CASE("rank table: describe lists every rank with its host") {
  RankTable t(parse_host_list("alice@a:1,[::1]:1"), 2);
  std::string d = t.describe();
  CHECK_THAT(d, Contains("alice@a"));
  CHECK_THAT(d, Contains("[::1]"));
  CHECK_THAT(d, Contains("cross_size"));
}

TEST_CASE("32,769 hosts of 65,536 slots do not overflow the slot total") {
  std::string text;
  for (int i = 0; i < 32769; ++i) text += "h" + std::to_string(i) + " slots=65536\n";
  const std::vector<hora::cli::HostSpec> hosts = hora::cli::parse_hostfile(text, "big");
  CHECK(hora::cli::total_slots(hosts) == 32769LL * 65536);
  CHECK_THROWS_WITH(RankTable::job_size(hosts, std::nullopt),
                    Catch::Matchers::Contains("2147549184 slots together") &&
                        Catch::Matchers::Contains("give -np"));
  CHECK(RankTable::job_size(hosts, 8) == 8);
  const RankTable table(hosts, 8);
  CHECK(table.size() == 8);
  CHECK(table.hosts().size() == 1);
}
