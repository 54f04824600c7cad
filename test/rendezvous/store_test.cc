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
    CHECK(r.header_room == wire::kHeaderBytes);
    const auto body = r.body();
    wire::Reader col(body);
    CHECK(col.u32() == 2);
    const std::string want = r.client == 1 ? "0" : "1";
    CHECK(col.bytes() == bytes_of("0" + want));
    CHECK(col.bytes() == bytes_of("1" + want));
  }
}

namespace {
// A GATHER upload of rank `from` in a job of `n`: record "r<from>", slice for rank i = the two
// bytes {from, i} (or `width` bytes of them).
wire::Bytes gather_req(const std::string& name, int from, int n, std::uint32_t width = 2,
                       std::chrono::milliseconds timeout = 1s) {
  wire::Bytes slices;
  for (int i = 0; i < n; ++i) {
    for (std::uint32_t k = 0; k < width; ++k) {
      slices.push_back(static_cast<std::uint8_t>(k % 2 == 0 ? from : i));
    }
  }
  return wire::encode_gather(name, static_cast<std::uint64_t>(timeout.count()),
                             bytes_of("r" + std::to_string(from)), width,
                             static_cast<std::uint32_t>(n), slices);
}
}  // namespace

TEST_CASE("gather hands every rank every record and its column, built in place", "[store]") {
  Store s(3);
  CHECK(s.handle(1, 0, Op::kGather, 5, gather_req("g", 0, 3), t0).empty());
  CHECK(s.handle(2, 1, Op::kGather, 6, gather_req("g", 1, 3), t0).empty());
  CHECK(s.stats().exchanges == 1);
  auto replies = s.handle(3, 2, Op::kGather, 7, gather_req("g", 2, 3), t0);
  REQUIRE(replies.size() == 3);
  CHECK(s.stats().exchanges == 0);
  CHECK(s.stats().waits == 0);
  for (const auto& r : replies) {
    REQUIRE(r.status == Status::kOk);
    CHECK(r.op == Op::kGather);
    CHECK(r.header_room == wire::kHeaderBytes);
    const int me = static_cast<int>(r.client) - 1;
    CHECK(r.shared == replies[0].shared);  // one records block for every answer
    const auto body = r.body();
    CHECK(body.size() + wire::kHeaderBytes == r.wire_bytes());
    auto view = wire::decode_gather_reply(body);
    REQUIRE(view.records.size() == 3);
    CHECK(view.width == 2);
    for (int j = 0; j < 3; ++j) {
      CHECK(wire::Bytes(view.records[j].begin(), view.records[j].end()) ==
            bytes_of("r" + std::to_string(j)));
      CHECK(view.column[2 * j] == j);
      CHECK(view.column[2 * j + 1] == me);
    }
  }
}

TEST_CASE("gather columns are right past the server's tiles, for every slice width", "[store]") {
  // 302 ranks: more than one tile of rows (64) and of columns (256), partial tiles of both, and
  // in those 2 rows and columns past the last whole 4 x 4 block.
  constexpr int n = 302;
  for (std::uint32_t width : {1u, 2u, 3u, 4u, 8u}) {
    INFO("width " << width);
    Store s(n);
    Store::Replies replies;
    for (int r = 0; r < n; ++r) {
      replies = s.handle(static_cast<Store::ClientId>(r + 1), r, Op::kGather, 1,
                         gather_req("g", r, n, width), t0);
    }
    REQUIRE(replies.size() == static_cast<std::size_t>(n));
    long wrong = 0;
    for (const auto& reply : replies) {
      const int me = static_cast<int>(reply.client) - 1;
      const auto body = reply.body();
      const auto view = wire::decode_gather_reply(body);
      REQUIRE(view.column.size() == static_cast<std::size_t>(n) * width);
      for (int j = 0; j < n; ++j) {
        for (std::uint32_t k = 0; k < width; ++k) {
          const auto want = static_cast<std::uint8_t>(k % 2 == 0 ? j : me);
          if (view.column[j * width + k] != want) wrong++;
        }
      }
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("gather refuses a wrong slice count, a different width and re-entry", "[store]") {
  Store s(2);
  auto wrong_count = s.handle(1, 0, Op::kGather, 1, gather_req("g", 0, 3), t0);
  REQUIRE(wrong_count.size() == 1);
  CHECK(wrong_count[0].status == Status::kInvalid);
  CHECK(message(wrong_count[0]) ==
        "gather 'g': rank 0 uploaded 3 slices, but the job has 2 ranks (one slice per rank)");

  CHECK(s.handle(1, 0, Op::kGather, 2, gather_req("g", 0, 2, 2), t0).empty());
  auto wider = s.handle(2, 1, Op::kGather, 3, gather_req("g", 1, 2, 4), t0);
  REQUIRE(wider.size() == 1);
  CHECK(wider[0].status == Status::kInvalid);
  CHECK(message(wider[0]) ==
        "gather 'g': rank 1 uploaded slices of 4 bytes, but rank 0 uploaded 2-byte slices "
        "(every rank must run the same libhora)");

  auto again = s.handle(1, 0, Op::kGather, 4, gather_req("g", 0, 2, 2), t0);
  REQUIRE(again.size() == 1);
  CHECK(message(again[0]) == "rank 0 entered gather 'g' again while already waiting in it");
}

TEST_CASE("gather times out naming the ranks that never came and those that left", "[store]") {
  Store s(3);
  CHECK(s.handle(1, 0, Op::kGather, 1, gather_req("g", 0, 3, 2, 1s), t0).empty());
  CHECK(s.handle(2, 1, Op::kGather, 1, gather_req("g", 1, 3, 2, 5s), t0).empty());
  s.forget(1);
  auto replies = s.expire(t0 + 5s);
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].status == Status::kTimeout);
  CHECK(message(replies[0]) ==
        "gather 'g' timed out after 5 s waiting for rank 2 of 3 (rank 0 entered but left: timed "
        "out or disconnected)");
  CHECK(s.stats().exchanges == 0);
}

TEST_CASE("a malformed gather payload is refused before anything is held", "[store]") {
  Store s(2);
  auto bad = wire::Writer().str("g").u64(1000).bytes(bytes_of("r")).u32(2).u32(2).u8(0).take();
  CHECK_THROWS_AS(s.handle(1, 0, Op::kGather, 1, bad, t0), wire::DecodeError);
  CHECK(s.stats().waits == 0);
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
