// cli/elastic/round_plan.h: the next round of an elastic job: who stays, who starts where, and
// Horovod's numbering with each host's ranks contiguous.
#include <catch2/catch.hpp>

#include "cli/elastic/round_plan.h"

using namespace hora::cli;

namespace {

std::vector<HostSpec> hosts(std::vector<std::pair<std::string, int>> list) {
  std::vector<HostSpec> out;
  for (auto& [name, slots] : list) {
    HostSpec h;
    h.name = name;
    h.slots = slots;
    out.push_back(h);
  }
  return out;
}

// The current workers of a plan, as the next round's input sees them.
std::vector<CurrentWorker> workers_of(const RoundPlan& plan) {
  std::vector<CurrentWorker> out;
  for (const PlannedRank& r : plan.ranks) {
    out.push_back({r.worker_id, plan.host_of(r.info.rank).name, r.local_slot, r.info.rank});
  }
  return out;
}

// "host:slot" of every rank, in rank order.
std::vector<std::string> layout(const RoundPlan& plan) {
  std::vector<std::string> out;
  for (const PlannedRank& r : plan.ranks) {
    out.push_back(plan.host_of(r.info.rank).name + ":" + std::to_string(r.local_slot));
  }
  return out;
}

RoundPlan round0() {
  RoundInput in;
  in.hosts = hosts({{"a", 2}, {"b", 2}});
  in.min_np = 2;
  in.max_np = 4;  // -np 4
  return plan_round(in);
}

}  // namespace

TEST_CASE("round 0: -np ranks on the hosts in order, Horovod's numbering") {
  const RoundPlan p = round0();
  REQUIRE(p.size == 4);
  CHECK(p.enough);
  CHECK(layout(p) == std::vector<std::string>{"a:0", "a:1", "b:0", "b:1"});
  CHECK(p.started == std::vector<int>{0, 1, 2, 3});
  CHECK(p.kept.empty());
  CHECK(p.stopped.empty());
  REQUIRE(p.hosts.size() == 2);
  CHECK(p.hosts[1].slots == 2);
  const RankInfo& r3 = p.ranks[3].info;
  CHECK(r3.rank == 3);
  CHECK(r3.local_rank == 1);
  CHECK(r3.local_size == 2);
  CHECK(r3.cross_rank == 1);
  CHECK(r3.cross_size == 2);
  CHECK(r3.host_index == 1);
  CHECK(p.ranks[3].is_new);
  CHECK(p.rank_of(2) == 2);
  CHECK_FALSE(p.rank_of(9).has_value());

  // -np below the slots: the first slots only; hosts without ranks are left out.
  RoundInput in;
  in.hosts = hosts({{"a", 2}, {"b", 2}, {"c", 2}});
  in.max_np = 3;
  const RoundPlan q = plan_round(in);
  CHECK(layout(q) == std::vector<std::string>{"a:0", "a:1", "b:0"});
  CHECK(q.hosts.size() == 2);
  CHECK(q.ranks[2].info.cross_size == 2);  // local rank 0 on a and b
  CHECK(q.ranks[1].info.cross_size == 1);  // local rank 1 only on a
}

TEST_CASE("shrink: a host is dropped, the others' workers stay and are renumbered") {
  const RoundPlan p0 = round0();
  RoundInput in;
  in.workers = workers_of(p0);
  // a failed: its workers are gone (one exited, the other was stopped) and it is blacklisted.
  in.workers.erase(in.workers.begin(), in.workers.begin() + 2);
  in.hosts = hosts({{"a", 2}, {"b", 2}});
  in.blacklisted = {"a"};
  in.min_np = 2;
  in.max_np = 4;
  in.next_worker_id = 4;
  const RoundPlan p = plan_round(in);
  CHECK(p.size == 2);
  CHECK(p.enough);
  CHECK(layout(p) == std::vector<std::string>{"b:0", "b:1"});
  CHECK(p.kept == std::vector<int>{2, 3});
  CHECK(p.started.empty());
  CHECK(p.stopped.empty());
  CHECK(p.rank_of(2) == 0);
  CHECK(p.rank_of(3) == 1);
  CHECK(p.ranks[0].info.host_index == 0);
  CHECK(p.ranks[1].info.cross_size == 1);

  // Discovery no longer lists b while its workers run: they are stopped.
  in.hosts = hosts({{"a", 2}});
  const RoundPlan q = plan_round(in);
  CHECK(q.size == 0);
  CHECK_FALSE(q.enough);
  CHECK(q.kept.empty());
  CHECK(q.stopped == std::vector<int>{2, 3});
}

TEST_CASE("grow: an appended host's workers come after, existing ranks keep their numbers") {
  const RoundPlan p0 = round0();
  RoundInput in;
  in.workers = workers_of(p0);
  in.hosts = hosts({{"c", 2}, {"a", 2}, {"b", 2}});  // discovery may print them in any order
  in.min_np = 2;
  in.max_np = 8;
  in.next_worker_id = 4;
  const RoundPlan p = plan_round(in);
  CHECK(p.size == 6);
  CHECK(layout(p) == std::vector<std::string>{"a:0", "a:1", "b:0", "b:1", "c:0", "c:1"});
  for (int id = 0; id < 4; ++id) CHECK(p.rank_of(id) == id);
  CHECK(p.kept == std::vector<int>{0, 1, 2, 3});
  CHECK(p.started == std::vector<int>{4, 5});
  CHECK(p.ranks[4].is_new);
  CHECK(p.ranks[4].info.cross_rank == 2);
  CHECK(p.ranks[4].info.cross_size == 3);
  CHECK(p.ranks[4].info.host_index == 2);

  // More slots on a host that runs workers: the new workers take its free slots, and the ranks
  // of the hosts after it move up (each host's ranks stay contiguous).
  in.hosts = hosts({{"a", 3}, {"b", 2}});
  const RoundPlan q = plan_round(in);
  CHECK(layout(q) == std::vector<std::string>{"a:0", "a:1", "a:2", "b:0", "b:1"});
  CHECK(q.rank_of(2) == 3);
  CHECK(q.started == std::vector<int>{4});
}

TEST_CASE("a blacklisted host gets no workers; one whose cooldown ended comes back last") {
  RoundInput in;
  in.hosts = hosts({{"a", 2}, {"b", 2}, {"c", 2}});
  in.blacklisted = {"b"};
  in.min_np = 1;
  const RoundPlan p = plan_round(in);
  CHECK(layout(p) == std::vector<std::string>{"a:0", "a:1", "c:0", "c:1"});

  RoundInput next;
  next.workers = workers_of(p);
  next.hosts = in.hosts;  // b's cooldown ended: no longer in the blacklist
  next.next_worker_id = 4;
  const RoundPlan q = plan_round(next);
  CHECK(layout(q) == std::vector<std::string>{"a:0", "a:1", "c:0", "c:1", "b:0", "b:1"});
  CHECK(q.started == std::vector<int>{4, 5});
}

TEST_CASE("max_np caps the size; kept workers are never displaced by new ones") {
  RoundInput in;
  in.hosts = hosts({{"a", 4}, {"b", 4}});
  in.max_np = 6;
  const RoundPlan p = plan_round(in);
  CHECK(p.size == 6);
  CHECK(layout(p) == std::vector<std::string>{"a:0", "a:1", "a:2", "a:3", "b:0", "b:1"});

  // Already at max_np, a new host gets nothing.
  RoundInput next;
  next.workers = workers_of(p);
  next.hosts = hosts({{"a", 4}, {"b", 4}, {"c", 4}});
  next.max_np = 6;
  next.next_worker_id = 6;
  const RoundPlan q = plan_round(next);
  CHECK(q.size == 6);
  CHECK(q.started.empty());
  CHECK(q.kept.size() == 6);

  // A worker of a lost, then replaced, slot: the free slot is filled, up to max_np.
  next.workers.erase(next.workers.begin() + 1);  // a:1 died (blacklisting off for this test)
  const RoundPlan r = plan_round(next);
  CHECK(layout(r) == std::vector<std::string>{"a:0", "a:1", "a:2", "a:3", "b:0", "b:1"});
  CHECK(r.started == std::vector<int>{6});
  CHECK(r.ranks[1].worker_id == 6);

  // A lower max_np than the workers: the last ones are stopped.
  next.max_np = 3;
  const RoundPlan s = plan_round(next);
  CHECK(s.size == 3);
  CHECK(s.kept == std::vector<int>{0, 2, 3});
  CHECK(s.stopped == std::vector<int>{4, 5});
  CHECK(layout(s) == std::vector<std::string>{"a:0", "a:2", "a:3"});
  CHECK(s.ranks[1].info.local_rank == 1);  // its position on the host, slot 2
}

TEST_CASE("min_np not met: the plan says not enough") {
  RoundInput in;
  in.hosts = hosts({{"a", 2}});
  in.min_np = 3;
  const RoundPlan p = plan_round(in);
  CHECK(p.size == 2);
  CHECK_FALSE(p.enough);

  in.hosts.clear();
  const RoundPlan empty = plan_round(in);
  CHECK(empty.size == 0);
  CHECK(empty.ranks.empty());
  CHECK(empty.hosts.empty());
  CHECK_FALSE(empty.enough);
}

TEST_CASE("a host with fewer slots keeps the workers of the slots it still has") {
  RoundInput in;
  in.workers = {{10, "a", 0, 0}, {11, "a", 1, 1}, {12, "a", 2, 2}};
  in.hosts = hosts({{"a", 2}});
  in.next_worker_id = 20;
  const RoundPlan p = plan_round(in);
  CHECK(p.kept == std::vector<int>{10, 11});
  CHECK(p.stopped == std::vector<int>{12});
}

TEST_CASE("bad input is refused") {
  RoundInput in;
  in.hosts = hosts({{"a", 2}, {"a", 2}});
  CHECK_THROWS_AS(plan_round(in), std::invalid_argument);
  in.hosts = hosts({{"a", 2}});
  in.workers = {{1, "a", 0, 0}, {1, "a", 1, 1}};
  CHECK_THROWS_AS(plan_round(in), std::invalid_argument);
  in.workers = {{1, "a", 0, 0}, {2, "a", 0, 1}};
  CHECK_THROWS_AS(plan_round(in), std::invalid_argument);
}
