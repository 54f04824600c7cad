// The rendezvous store (rendezvous/store.h) on its own: no sockets, no io thread, a made-up
// clock. Requests go in as encoded payloads; the replies that come out are checked directly.
#include "rendezvous/store.h"

#include <catch2/catch.hpp>

using namespace hora::rdv;
using namespace std::chrono_literals;
using wire::Op;
using wire::Status;
using Clock = Store::Clock;

namespace {

const Clock::time_point t0{};  // the test's clock starts at the epoch of steady_clock

wire::Bytes bytes_of(const std::string& s) { return wire::Bytes(s.begin(), s.end()); }

wire::Bytes set_req(const std::string& key, const std::string& value) {
  return wire::encode(wire::SetRequest{key, bytes_of(value)});
}
wire::Bytes wait_req(const std::string& key, std::chrono::milliseconds timeout) {
  return wire::encode(wire::WaitRequest{key, static_cast<std::uint64_t>(timeout.count())});
}

std::string message(const Store::Reply& r) { return wire::decode_message(r.payload); }

}  // namespace

TEST_CASE("set answers OK and wakes a parked get with the value", "[store]") {
  Store s(2);
  CHECK(s.handle(1, 0, Op::kGet, 7, wait_req("k", 5s), t0).empty());
  CHECK(s.stats().waits == 1);
  CHECK(s.next_deadline() == t0 + 5s);
  auto replies = s.handle(2, 1, Op::kSet, 9, set_req("k", "v"), t0 + 1s);
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].client == 2);
  CHECK(replies[0].id == 9);
  CHECK(replies[0].status == Status::kOk);
  CHECK(replies[1].client == 1);
  CHECK(replies[1].op == Op::kGet);
  CHECK(replies[1].id == 7);
  CHECK(replies[1].status == Status::kOk);
  CHECK(wire::Reader(replies[1].payload).bytes() == bytes_of("v"));
  CHECK(s.stats().waits == 0);
  CHECK_FALSE(s.next_deadline());
}

TEST_CASE("a parked get times out at its deadline, not before", "[store]") {
  Store s(1);
  CHECK(s.handle(1, 0, Op::kGet, 3, wait_req("gloo/rank/3", 300ms), t0).empty());
  CHECK(s.expire(t0 + 299ms).empty());
  auto replies = s.expire(t0 + 300ms);
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].status == Status::kTimeout);
  CHECK(message(replies[0]) ==
        "get of key 'gloo/rank/3' timed out after 300 ms: no rank has set it");
  CHECK(s.stats().waits == 0);
}

TEST_CASE("barrier completes when every rank entered; a timeout names who was missing", "[store]") {
  Store s(3);
  CHECK(s.handle(10, 0, Op::kBarrier, 1, wait_req("b", 1s), t0).empty());
  CHECK(s.handle(11, 1, Op::kBarrier, 1, wait_req("b", 1s), t0).empty());
  auto done = s.handle(12, 2, Op::kBarrier, 1, wait_req("b", 1s), t0);
  CHECK(done.size() == 3);
  for (const auto& r : done) CHECK(r.status == Status::kOk);
  CHECK(s.stats().barriers == 0);

  CHECK(s.handle(10, 0, Op::kBarrier, 2, wait_req("c", 1s), t0).empty());
  CHECK(s.handle(11, 1, Op::kBarrier, 2, wait_req("c", 2s), t0).empty());
  auto first = s.expire(t0 + 1s);
  REQUIRE(first.size() == 1);
  CHECK(message(first[0]) == "barrier 'c' timed out after 1 s waiting for rank 2 of 3");
  auto second = s.expire(t0 + 2s);
  REQUIRE(second.size() == 1);
  CHECK(message(second[0]) ==
        "barrier 'c' timed out after 2 s waiting for rank 2 of 3 (rank 0 "
        "entered but left: timed out or disconnected)");
}

TEST_CASE("entering a barrier twice is refused; the first entry stays", "[store]") {
  Store s(2);
  CHECK(s.handle(1, 0, Op::kBarrier, 1, wait_req("b", 10s), t0).empty());
  auto again = s.handle(1, 0, Op::kBarrier, 2, wait_req("b", 10s), t0);
  REQUIRE(again.size() == 1);
  CHECK(again[0].status == Status::kInvalid);
  CHECK_THAT(message(again[0]), Catch::Contains("again while already waiting"));
  CHECK(s.handle(2, 1, Op::kBarrier, 1, wait_req("b", 10s), t0).size() == 2);
}

TEST_CASE("exchange hands every rank its column", "[store]") {
  Store s(2);
  auto row = [](const std::string& a, const std::string& b) {
    return wire::encode_exchange("x", 1000, {bytes_of(a), bytes_of(b)});
  };
  CHECK(s.handle(1, 0, Op::kExchange, 5, row("00", "01"), t0).empty());
  CHECK(s.stats().exchanges == 1);
  auto replies = s.handle(2, 1, Op::kExchange, 6, row("10", "11"), t0);
  REQUIRE(replies.size() == 2);
  CHECK(s.stats().exchanges == 0);
  for (const auto& r : replies) {
    REQUIRE(r.status == Status::kOk);
    wire::Reader col(r.payload);
    CHECK(col.u32() == 2);
    const std::string want = r.client == 1 ? "0" : "1";
    CHECK(col.bytes() == bytes_of("0" + want));
    CHECK(col.bytes() == bytes_of("1" + want));
  }
}

TEST_CASE("a client that goes away leaves its barrier: the timeout says it entered and left",
          "[store]") {
  Store s(3);
  CHECK(s.handle(1, 0, Op::kBarrier, 1, wait_req("b", 1s), t0).empty());
  CHECK(s.handle(2, 1, Op::kBarrier, 1, wait_req("b", 5s), t0).empty());
  s.forget(1);
  CHECK(s.stats().waits == 1);
  auto replies = s.expire(t0 + 5s);
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].client == 2);
  CHECK(message(replies[0]) ==
        "barrier 'b' timed out after 5 s waiting for rank 2 of 3 (rank 0 "
        "entered but left: timed out or disconnected)");
}

TEST_CASE("add counts, refuses a non-counter, and wakes getters", "[store]") {
  Store s(1);
  auto add = [&](std::int64_t d) {
    return s.handle(1, 0, Op::kAdd, 1, wire::encode(wire::AddRequest{"n", d}), t0);
  };
  CHECK(wire::decode_i64(add(5)[0].payload) == 5);
  CHECK(wire::decode_i64(add(-2)[0].payload) == 3);
  s.handle(1, 0, Op::kSet, 2, set_req("s", "abc"), t0);
  auto bad = s.handle(1, 0, Op::kAdd, 3, wire::encode(wire::AddRequest{"s", 1}), t0);
  CHECK(bad[0].status == Status::kInvalid);
  CHECK_THAT(message(bad[0]), Catch::Contains("3-byte value, not a counter"));
  auto del = s.handle(1, 0, Op::kDel, 4, wire::encode(wire::DelRequest{"n"}), t0);
  CHECK(del[0].payload == wire::encode_u8(1));
  CHECK(s.stats().keys == 1);
}

TEST_CASE("after abort, waits are dropped and every request is answered ABORTED", "[store]") {
  Store s(2);
  CHECK(s.handle(1, 0, Op::kGet, 1, wait_req("k", 5s), t0).empty());
  CHECK(s.abort("rank 1 exited with code 3"));
  CHECK_FALSE(s.abort("again"));
  CHECK(s.stats().waits == 0);
  CHECK_FALSE(s.next_deadline());
  auto r = s.handle(1, 0, Op::kSet, 2, set_req("k", "v"), t0);
  REQUIRE(r.size() == 1);
  CHECK(r[0].status == Status::kAborted);
  CHECK(message(r[0]) == "rank 1 exited with code 3");
  // A malformed payload is still refused after an abort.
  CHECK_THROWS_AS(s.handle(1, 0, Op::kSet, 3, wire::Bytes{1, 2}, t0), wire::DecodeError);
}
