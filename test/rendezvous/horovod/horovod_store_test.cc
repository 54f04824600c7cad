// The socket-free store behind Horovod's HTTP rendezvous: the plan's scopes, finalize, limits.
#include <catch2/catch.hpp>

#include "rendezvous/horovod/store.h"

using namespace hora::rdv::horovod;

namespace {

// Two hosts: h1 runs ranks 0,1 (local 0,1), h2 runs rank 2 (local 0).
ScopePlan two_hosts() {
  ScopePlan p;
  p.world_size = 3;
  p.add_rank("h1", {0, 0, 2, 0, 2});
  p.add_rank("h1", {1, 1, 2, 0, 1});
  p.add_rank("h2", {2, 0, 1, 1, 2});
  return p;
}

}  // namespace

TEST_CASE("the plan holds global, one local scope per host and one cross scope per local rank") {
  const ScopePlan p = two_hosts();
  CHECK(p.sizes ==
        std::map<std::string, int>{
            {"global", 3}, {"local_h1", 2}, {"local_h2", 1}, {"cross_0", 2}, {"cross_1", 1}});
  auto ps = resolve_scope(p, "local_h1_process_set_hash_7d48533536350577");
  REQUIRE(ps);
  CHECK(ps->base == "local_h1");
  CHECK(ps->base_size == 2);
  CHECK(ps->kind == ScopeKind::kProcessSet);
  CHECK(resolve_scope(p, "global")->kind == ScopeKind::kGloo);
  CHECK_FALSE(resolve_scope(p, "local_h3"));
  CHECK_FALSE(resolve_scope(p, "global_process_set_hash_"));
  CHECK_FALSE(resolve_scope(p, "global_process_set_hash_XYZ"));
  CHECK_FALSE(resolve_scope(p, "cross_2"));
  CHECK_FALSE(resolve_scope(p, "worker_addresses_process_set_hash_1"));
  CHECK_FALSE(resolve_scope(p, "runfunc"));  // horovod.run()'s own KV server, not a rendezvous
  CHECK(resolve_scope(p, "worker_addresses")->kind == ScopeKind::kWorkerAddresses);
  CHECK(resolve_scope(p, "rank_and_size")->kind == ScopeKind::kRankAndSize);
  REQUIRE(find_slot(p, "h2:0"));
  CHECK(find_slot(p, "h2:0")->rank == 2);
  CHECK(find_slot(p, "h2:0")->cross_rank == 1);
  CHECK_FALSE(find_slot(p, "h2:1"));
  CHECK_FALSE(find_slot(p, "h3:0"));
}

TEST_CASE("PUT then GET returns the body; a missing key is 404") {
  Store s(two_hosts());
  CHECK(s.handle(Method::kGet, "/global/0", "").status == 404);
  CHECK(s.handle(Method::kPut, "/global/0", "addr0").status == 200);
  const Reply r = s.handle(Method::kGet, "/global/0", "");
  CHECK(r.status == 200);
  CHECK(r.body == "addr0");
  CHECK(s.handle(Method::kPut, "/global/0", "again").status == 200);  // overwrite, as Horovod
  CHECK(s.handle(Method::kGet, "/global/0", "").body == "again");
}

TEST_CASE("PUTs to global name the ranks that reached hvd.init()") {
  Store s(two_hosts());
  s.handle(Method::kPut, "/global/rank_2", "2");
  s.handle(Method::kPut, "/global/0", "x");
  s.handle(Method::kPut, "/local_h1/1", "x");  // not global: does not count
  s.handle(Method::kPut, "/global/7", "x");    // not a rank of the job
  CHECK(s.global_ranks_seen() == std::set<int>{0, 2});
}

TEST_CASE(
    "a plan scope is cleared and closed once every rank of it sent DELETE; a PUT reopens it") {
  Store s(two_hosts());
  REQUIRE(s.handle(Method::kPut, "/local_h1/0", "a").status == 200);
  REQUIRE(s.handle(Method::kPut, "/local_h1/1", "b").status == 200);
  CHECK(s.handle(Method::kDelete, "/local_h1/0", "").status == 200);
  CHECK(s.handle(Method::kDelete, "/local_h1/0", "").status == 200);  // repeated: same rank
  CHECK_FALSE(s.closed("local_h1"));
  CHECK(s.handle(Method::kGet, "/local_h1/1", "").body == "b");
  CHECK(s.handle(Method::kDelete, "/local_h1/1", "").status == 200);
  CHECK(s.closed("local_h1"));
  CHECK(s.handle(Method::kGet, "/local_h1/1", "").status == 404);
  CHECK(s.stats().keys == 0);
  CHECK(s.handle(Method::kDelete, "/local_h1/1", "").status == 200);  // late: changes nothing
  CHECK(s.closed("local_h1"));
  CHECK(s.reopened("local_h1") == 0);
  // Other scopes are untouched.
  CHECK(s.handle(Method::kPut, "/local_h2/0", "c").status == 200);

  // hvd.shutdown(); hvd.init(): the same scope, a second round from an empty store.
  REQUIRE(s.handle(Method::kPut, "/local_h1/rank_1", "1").status == 200);
  CHECK_FALSE(s.closed("local_h1"));
  CHECK(s.reopened("local_h1") == 1);
  CHECK(s.handle(Method::kGet, "/local_h1/0", "").status == 404);  // nothing of round one
  REQUIRE(s.handle(Method::kPut, "/local_h1/1", "b2").status == 200);
  REQUIRE(s.handle(Method::kPut, "/local_h1/0", "a2").status == 200);
  CHECK(s.handle(Method::kGet, "/local_h1/0", "").body == "a2");
  CHECK(s.handle(Method::kDelete, "/local_h1/1", "").status == 200);
  CHECK_FALSE(s.closed("local_h1"));  // rank 1's DELETE of round one does not count here
  CHECK(s.handle(Method::kDelete, "/local_h1/0", "").status == 200);
  CHECK(s.closed("local_h1"));
  CHECK(s.reopened("local_h1") == 1);
}

TEST_CASE("each plan scope counts its own DELETEs (horovodrun clears every count at once)") {
  Store s(two_hosts());
  REQUIRE(s.handle(Method::kPut, "/local_h1/0", "a").status == 200);
  REQUIRE(s.handle(Method::kPut, "/local_h1/rank_1", "b").status == 200);
  REQUIRE(s.handle(Method::kPut, "/cross_1/0", "c").status == 200);
  CHECK(s.handle(Method::kDelete, "/local_h1/0", "").status == 200);
  // cross_1 has one rank: it completes while local_h1 is half done.
  CHECK(s.handle(Method::kDelete, "/cross_1/0", "").status == 200);
  CHECK(s.closed("cross_1"));
  CHECK(s.handle(Method::kDelete, "/local_h1/1", "").status == 200);
  CHECK(s.closed("local_h1"));
  CHECK(s.handle(Method::kGet, "/local_h1/0", "").status == 404);
}

TEST_CASE("a DELETE counts only from a rank that stored its address in the scope this round") {
  Store s(two_hosts());
  // DELETE /global/0 and /global/1 from a stranger finalized the scope.
  const Reply early = s.handle(Method::kDelete, "/global/0", "");
  CHECK(early.status == 403);
  CHECK_THAT(early.refusal, Catch::Contains("has not stored its address"));
  CHECK_THAT(early.refusal, !Catch::Contains("/global/0"));  // the server adds method and target
  CHECK(s.handle(Method::kDelete, "/global/1", "").status == 403);
  CHECK(s.handle(Method::kDelete, "/global/2", "").status == 403);
  CHECK_FALSE(s.closed("global"));
  REQUIRE(s.handle(Method::kPut, "/global/rank_0", "a").status == 200);
  REQUIRE(s.handle(Method::kPut, "/global/1", "b").status == 200);
  CHECK(s.handle(Method::kDelete, "/global/0", "").status == 200);
  CHECK(s.handle(Method::kDelete, "/global/1", "").status == 200);
  CHECK(s.handle(Method::kDelete, "/global/2", "").status == 403);  // rank 2 never stored
  CHECK_FALSE(s.closed("global"));
  CHECK(s.handle(Method::kDelete, "/global/3", "").status == 400);  // not a rank of the scope
  REQUIRE(s.handle(Method::kPut, "/global/2", "c").status == 200);
  CHECK(s.handle(Method::kDelete, "/global/2", "").status == 200);
  CHECK(s.closed("global"));
}

TEST_CASE("worker_addresses: one key per slot of the plan, stored as sent") {
  Store s(two_hosts());
  CHECK(s.handle(Method::kPut, "/worker_addresses/h1:1", "gASV").status == 200);
  CHECK(s.handle(Method::kGet, "/worker_addresses/h1:1", "").body == "gASV");
  CHECK(s.handle(Method::kGet, "/worker_addresses/h2:0", "").status == 404);
  CHECK(s.handle(Method::kPut, "/worker_addresses/h1:1", "again").status == 200);
  for (const char* bad : {"h2:1", "h3:0", "h1", "1", "h1:01"}) {
    const Reply r = s.handle(Method::kPut, std::string("/worker_addresses/") + bad, "x");
    CHECK(r.status == 403);
    CHECK_THAT(r.refusal, Catch::Contains("<host>:<local rank>"));
  }
  CHECK(s.handle(Method::kPut, "/worker_addresses/" + std::string(300, 'h') + ":0", "x").status ==
        400);
  CHECK(s.stats().keys == 1);
  // A long host name is a valid slot key.
  ScopePlan p;
  p.world_size = 1;
  const std::string host(200, 'n');
  p.add_rank(host, {0, 0, 1, 0, 1});
  Store l(p);
  CHECK(l.handle(Method::kPut, "/worker_addresses/" + host + ":0", "x").status == 200);
  CHECK(s.handle(Method::kDelete, "/worker_addresses/h1:1", "").status == 200);
  CHECK(s.stats().keys == 0);
}

TEST_CASE("rank_and_size answers each slot from the plan, read-only") {
  Store s(two_hosts());
  CHECK(s.handle(Method::kGet, "/rank_and_size/h1:0", "").body == "0,3,0,2,0,2");
  CHECK(s.handle(Method::kGet, "/rank_and_size/h1:1", "").body == "1,3,1,2,0,1");
  CHECK(s.handle(Method::kGet, "/rank_and_size/h2:0", "").body == "2,3,0,1,1,2");
  // As horovodrun's elastic driver for a slot it has no rank for.
  const Reply none = s.handle(Method::kGet, "/rank_and_size/h3:0", "");
  CHECK(none.status == 200);
  CHECK(none.body == "-1,-1,-1,-1,-1,-1");
  CHECK(s.handle(Method::kPut, "/rank_and_size/h1:0", "5,6,0,1,0,1").status == 403);
  CHECK(s.handle(Method::kDelete, "/rank_and_size/h1:0", "").status == 403);
  CHECK(s.handle(Method::kGet, "/rank_and_size/h1:0", "").body == "0,3,0,2,0,2");
  CHECK(s.stats().keys == 0);
}

TEST_CASE("DELETE in a process-set scope removes that rank's key; the scope goes when empty") {
  Store s(two_hosts());
  const std::string scope = "/global_process_set_hash_abc123";
  REQUIRE(s.handle(Method::kPut, scope + "/0", "a").status == 200);
  REQUIRE(s.handle(Method::kPut, scope + "/1", "b").status == 200);
  CHECK(s.handle(Method::kDelete, scope + "/0", "").status == 200);
  CHECK(s.handle(Method::kGet, scope + "/0", "").status == 404);
  CHECK(s.handle(Method::kGet, scope + "/1", "").body == "b");
  CHECK(s.handle(Method::kDelete, scope + "/1", "").status == 200);
  CHECK(s.stats().scopes == 0);
  // Not closed: the same process set may be registered again.
  CHECK(s.handle(Method::kPut, scope + "/0", "again").status == 200);
}

TEST_CASE("requests outside the plan or the protocol are refused with a reason") {
  Store s(two_hosts());
  CHECK(s.handle(Method::kPut, "/local_h3/0", "x").status == 403);
  CHECK(s.handle(Method::kGet, "/cross_5/0", "").status == 403);
  CHECK(s.handle(Method::kPut, "/global", "x").status == 400);
  CHECK(s.handle(Method::kPut, "/global/0/extra", "x").status == 400);
  CHECK(s.handle(Method::kPut, "global/0", "x").status == 400);
  CHECK(s.handle(Method::kPut, "/global/a%20b", "x").status == 400);
  CHECK(s.handle(Method::kPut, "/global/" + std::string(65, 'k'), "x").status == 400);
  CHECK(s.handle(Method::kDelete, "/global/3", "").status == 400);  // not a rank of global
  CHECK(s.handle(Method::kDelete, "/global/rank_0", "").status == 400);
  CHECK(s.handle(Method::kOther, "/global/0", "").status == 405);
  const Reply r = s.handle(Method::kPut, "/local_h3/0", "x");
  CHECK_THAT(r.refusal, Catch::Contains("local_h3"));
  CHECK(r.body == r.refusal + "\n");
  CHECK(s.stats().keys == 0);
}

TEST_CASE("bodies, keys per scope and process-set scopes are bounded") {
  StoreLimits limits;
  limits.max_body_bytes = 100;
  limits.max_process_set_scopes = 2;
  Store s(two_hosts(), limits);
  CHECK(s.handle(Method::kPut, "/global/0", std::string(100, 'x')).status == 200);
  CHECK(s.handle(Method::kPut, "/global/1", std::string(101, 'x')).status == 413);
  // global has 3 ranks: 4*3+8 = 20 keys.
  for (int i = 0; i < 19; ++i) {
    REQUIRE(s.handle(Method::kPut, "/global/k" + std::to_string(i), "v").status == 200);
  }
  CHECK(s.handle(Method::kPut, "/global/one_too_many", "v").status == 403);
  CHECK(s.handle(Method::kPut, "/global/0", "overwrite is fine").status == 200);
  CHECK(s.handle(Method::kPut, "/global_process_set_hash_1/0", "v").status == 200);
  CHECK(s.handle(Method::kPut, "/global_process_set_hash_2/0", "v").status == 200);
  CHECK(s.handle(Method::kPut, "/global_process_set_hash_3/0", "v").status == 403);
}

TEST_CASE("the default body limit grows with the job") {
  ScopePlan small;
  small.world_size = 2;
  ScopePlan big;
  big.world_size = 4096;
  CHECK(StoreLimits::for_plan(small).max_body_bytes >= 64u * 1024);
  CHECK(StoreLimits::for_plan(big).max_body_bytes >= 4096u * 256);
  CHECK(Store(small).max_body_bytes() == StoreLimits::for_plan(small).max_body_bytes);
}
