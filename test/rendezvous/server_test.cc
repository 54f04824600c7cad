// Server operations through the real client over 127.0.0.1: key/value, counters, barriers and
// exchanges, with the timeouts and their messages.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <atomic>

#include "test/rendezvous/harness.h"

using namespace hora::rdv;
using namespace hora::rdv::test;

namespace {

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

// Connects ranks 0..n-1.
std::vector<std::unique_ptr<Client>> connect_all(TestServer& ts, int n) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int r = 0; r < n; ++r) clients.push_back(ts.connect(r));
  return clients;
}

// Runs f(rank) on one thread per rank and rethrows the first failure.
template <typename F>
void on_threads(int n, F f) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace

TEST_CASE("set then get returns the value; set overwrites", "[server]") {
  TestServer ts(server_options(1));
  auto c = ts.connect(0);
  c->set("k", bytes_of("one"), 5s);
  CHECK(c->get("k", 5s) == bytes_of("one"));
  c->set("k", Bytes{0, 1, 2, 255}, 5s);
  CHECK(c->get("k", 5s) == (Bytes{0, 1, 2, 255}));
  c->set("empty", {}, 5s);
  CHECK(c->get("empty", 5s).empty());
}

TEST_CASE("a blocking get is satisfied by a later set from another rank", "[server]") {
  TestServer ts(server_options(2));
  auto a = ts.connect(0);
  auto b = ts.connect(1);
  auto got = std::async(std::launch::async, [&] { return a->get("addr/0", 10s); });
  // The get is parked on the server before the set is sent.
  REQUIRE(ts.wait_stats([](const Server::Stats& s) { return s.waits == 1; }));
  CHECK(got.wait_for(0s) == std::future_status::timeout);
  b->set("addr/0", bytes_of("10.0.0.1:1234"), 5s);
  REQUIRE(got.wait_for(5s) == std::future_status::ready);
  CHECK(got.get() == bytes_of("10.0.0.1:1234"));
  CHECK(ts.stats().waits == 0);
}

TEST_CASE("several getters of one key are all woken, by set or by add", "[server]") {
  TestServer ts(server_options(4));
  auto clients = connect_all(ts, 4);
  std::vector<std::future<Bytes>> gets;
  for (int r = 1; r < 4; ++r) {
    gets.push_back(std::async(std::launch::async, [&, r] { return clients[r]->get("go", 10s); }));
  }
  REQUIRE(ts.wait_stats([](const Server::Stats& s) { return s.waits == 3; }));
  CHECK(clients[0]->add("go", 42, 5s) == 42);
  for (auto& g : gets) CHECK(wire::decode_i64(g.get()) == 42);
}

TEST_CASE("get times out naming the key", "[server]") {
  TestServer ts(server_options(1));
  auto c = ts.connect(0);
  auto start = Clock::now();
  CHECK_THROWS_MATCHES(c->get("gloo/rank/3", 300ms), TimeoutError,
                       Catch::Matchers::Message(
                           "get of key 'gloo/rank/3' timed out after 300 ms: no rank has set it"));
  auto took = Clock::now() - start;
  CHECK(took >= 300ms);
  CHECK(took < 5s);
  // A zero timeout answers at once; the connection is still fine afterwards.
  CHECK_THROWS_AS(c->get("nope", 0ms), TimeoutError);
  CHECK(ts.stats().waits == 0);
  c->set("x", bytes_of("y"), 5s);
  CHECK(c->get("x", 5s) == bytes_of("y"));
}

TEST_CASE("add keeps a 64-bit counter", "[server]") {
  TestServer ts(server_options(4));
  auto clients = connect_all(ts, 4);
  CHECK(clients[0]->add("n", 5, 5s) == 5);
  CHECK(clients[1]->add("n", -2, 5s) == 3);
  on_threads(4, [&](int r) {
    for (int i = 0; i < 50; ++i) clients[r]->add("n", 1, 5s);
  });
  CHECK(clients[2]->add("n", 0, 5s) == 203);
  // The counter is stored as 8 little-endian bytes, readable with get.
  CHECK(wire::decode_i64(clients[3]->get("n", 5s)) == 203);
  CHECK(clients[0]->add("big", std::numeric_limits<std::int64_t>::max(), 5s) ==
        std::numeric_limits<std::int64_t>::max());
  CHECK(clients[0]->add("big", 1, 5s) == std::numeric_limits<std::int64_t>::min());
}

TEST_CASE("add on a key that is not a counter is refused, the connection survives", "[server]") {
  TestServer ts(server_options(1));
  auto c = ts.connect(0);
  c->set("name", bytes_of("text"), 5s);
  CHECK_THROWS_WITH(c->add("name", 1, 5s), Catch::Contains("not a counter"));
  CHECK(c->get("name", 5s) == bytes_of("text"));
}

TEST_CASE("del removes a key", "[server]") {
  TestServer ts(server_options(1));
  auto c = ts.connect(0);
  c->set("k", bytes_of("v"), 5s);
  CHECK(ts.stats().keys == 1);
  c->del("k", 5s);
  CHECK(ts.stats().keys == 0);
  CHECK_THROWS_AS(c->get("k", 100ms), TimeoutError);
  c->del("never-set", 5s);  // deleting a missing key is not an error
  c->set("k", bytes_of("again"), 5s);
  CHECK(c->get("k", 5s) == bytes_of("again"));
}

TEST_CASE("barrier releases all ranks together and can be reused", "[server]") {
  const int n = GENERATE(1, 2, 3, 8);
  TestServer ts(server_options(n));
  auto clients = connect_all(ts, n);
  std::atomic<int> entered{0};
  // Nobody leaves round k before everyone has entered it. Counted here and checked after the
  // join: Catch's assertions are not thread-safe (ThreadSanitizer reported CHECK on these
  // threads racing on Catch's own state).
  std::atomic<int> left_early{0};
  on_threads(n, [&](int r) {
    for (int round = 0; round < 3; ++round) {
      entered++;
      clients[r]->barrier("step", 10s);
      if (entered.load() < n * (round + 1)) left_early++;
    }
  });
  CHECK(left_early.load() == 0);
  CHECK(ts.stats().barriers == 0);
  CHECK(ts.stats().waits == 0);
}

TEST_CASE("barrier timeout names the missing ranks", "[server]") {
  TestServer ts(server_options(4));
  auto clients = connect_all(ts, 4);
  std::string messages[2];
  on_threads(2, [&](int r) {
    try {
      clients[r * 2]->barrier("init", 500ms);
    } catch (const TimeoutError& e) {
      messages[r] = e.what();
    }
  });
  // Both name the ranks that never came. Whichever timed out second also says the other one
  // entered and left, rather than counting it as missing.
  std::vector<std::string> sorted{messages[0], messages[1]};
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted[0] == "barrier 'init' timed out after 500 ms waiting for ranks 1, 3 of 4");
  CHECK_THAT(sorted[1], Catch::Matches("barrier 'init' timed out after 500 ms waiting for ranks "
                                       "1, 3 of 4 \\(rank [02] entered but left: timed out or "
                                       "disconnected\\)"));
  // The timed-out ranks left the barrier: a full barrier under the same name still works.
  CHECK(ts.stats().barriers == 0);
  on_threads(4, [&](int r) { clients[r]->barrier("init", 10s); });
}

TEST_CASE("a rank entering a barrier it already waits in is refused", "[server]") {
  TestServer ts(server_options(2));
  auto c = ts.connect(0);
  auto first = std::async(std::launch::async, [&] { c->barrier("b", 60s); });
  REQUIRE(ts.wait_stats([](const Server::Stats& s) { return s.waits == 1; }));
  CHECK_THROWS_WITH(c->barrier("b", 60s), Catch::Contains("again while already waiting"));
  // The first entry is still in: rank 1 completes the barrier for it.
  ts.connect(1)->barrier("b", 60s);
  CHECK_NOTHROW(first.get());
}

TEST_CASE("exchange hands every rank its column", "[server]") {
  const int n = GENERATE(1, 2, 3, 8);
  TestServer ts(server_options(n));
  auto clients = connect_all(ts, n);
  // Slice lengths vary (including empty) so misplaced slices cannot look right by accident.
  auto slice = [](int from, int to) {
    return from == to ? Bytes{}
                      : bytes_of(fmt::format("from {} to {}{}", from, to,
                                             std::string(from * 3 + to, '.')));
  };
  std::vector<std::vector<Bytes>> columns(n);
  on_threads(n, [&](int r) {
    std::vector<Bytes> row;
    for (int i = 0; i < n; ++i) row.push_back(slice(r, i));
    columns[r] = clients[r]->exchange("mesh", row, 10s);
  });
  for (int r = 0; r < n; ++r) {
    REQUIRE(columns[r].size() == static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      INFO("rank " << r << " column entry from rank " << j);
      CHECK(columns[r][j] == slice(j, r));
    }
  }
  // Nothing of the exchange is left on the server.
  auto st = ts.stats();
  CHECK(st.exchanges == 0);
  CHECK(st.waits == 0);
  // The name can be used again (checked after the join: Catch's CHECK is not thread-safe).
  std::vector<std::vector<Bytes>> again(n);
  on_threads(n, [&](int r) {
    std::vector<Bytes> row(n, Bytes{static_cast<std::uint8_t>(r)});
    again[r] = clients[r]->exchange("mesh", row, 10s);
  });
  for (int r = 0; r < n; ++r) {
    REQUIRE(again[r].size() == static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) CHECK(again[r][j] == Bytes{static_cast<std::uint8_t>(j)});
  }
}

TEST_CASE("gather hands every rank every record and its column", "[server]") {
  const int n = GENERATE(1, 2, 3, 8);
  const std::size_t width = GENERATE(0, 1, 3);
  TestServer ts(server_options(n));
  auto clients = connect_all(ts, n);
  // Record sizes vary (including empty); slice bytes encode sender and recipient.
  auto record = [](int r) {
    return bytes_of(std::string(static_cast<std::size_t>(r) * 5, 'a' + r));
  };
  auto byte = [](int from, int to, std::size_t k) {
    return static_cast<std::uint8_t>(from * 31 + to * 7 + static_cast<int>(k));
  };
  std::vector<GatherResult> results(n);
  on_threads(n, [&](int r) {
    Bytes slices;
    for (int i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < width; ++k) slices.push_back(byte(r, i, k));
    }
    results[r] = clients[r]->gather("mesh", record(r), width, slices, 10s);
  });
  for (int r = 0; r < n; ++r) {
    REQUIRE(results[r].records.size() == static_cast<std::size_t>(n));
    REQUIRE(results[r].column.size() == n * width);
    for (int j = 0; j < n; ++j) {
      INFO("rank " << r << " entry from rank " << j);
      CHECK(Bytes(results[r].records[j].begin(), results[r].records[j].end()) == record(j));
      auto slice = results[r].slice(j);
      for (std::size_t k = 0; k < width; ++k) CHECK(slice[k] == byte(j, r, k));
    }
  }
  auto st = ts.stats();
  CHECK(st.exchanges == 0);
  CHECK(st.waits == 0);
}

TEST_CASE("gather with a width other ranks do not use is refused by the server", "[server]") {
  TestServer ts(server_options(2));
  auto clients = connect_all(ts, 2);
  std::string first_error;
  auto waiting =
      std::async(std::launch::async, [&] { return clients[0]->gather("g", {}, 2, Bytes(4), 2s); });
  // Rank 0's upload is there once the store holds a wait for it.
  const auto until = Clock::now() + 10s;
  while (ts.stats().waits == 0 && Clock::now() < until) std::this_thread::sleep_for(1ms);
  CHECK_THROWS_WITH(clients[1]->gather("g", {}, 3, Bytes(6), 2s),
                    Catch::Contains("rank 1 uploaded slices of 3 bytes, but rank 0 uploaded "
                                    "2-byte slices"));
  CHECK_THROWS_MATCHES(waiting.get(), TimeoutError,
                       Catch::Matchers::Message(
                           "gather 'g' timed out after 2 s waiting for rank 1 of 2"));
  CHECK(ts.stats().exchanges == 0);
}

TEST_CASE("gather with the wrong amount of slice bytes is refused before sending", "[server]") {
  TestServer ts(server_options(2));
  auto c = ts.connect(0);
  CHECK_THROWS_WITH(c->gather("g", {}, 2, Bytes(3), 1s),
                    Catch::Contains("needs one 2-byte slice per rank (4 bytes), got 3"));
  CHECK(ts.stats().waits == 0);
}

TEST_CASE("exchange timeout names the missing ranks and drops the upload", "[server]") {
  TestServer ts(server_options(3));
  auto clients = connect_all(ts, 3);
  std::vector<Bytes> row(3, bytes_of("x"));
  CHECK_THROWS_MATCHES(clients[1]->exchange("gloo", row, 300ms), TimeoutError,
                       Catch::Matchers::Message(
                           "exchange 'gloo' timed out after 300 ms waiting for ranks 0, 2 of 3"));
  CHECK(ts.stats().exchanges == 0);
}

TEST_CASE("exchange with the wrong number of slices is refused before sending", "[server]") {
  TestServer ts(server_options(2));
  auto c = ts.connect(0);
  CHECK_THROWS_WITH(c->exchange("e", {bytes_of("only one")}, 1s),
                    Catch::Contains("needs one slice per rank (2), got 1"));
}

TEST_CASE("a rank that disconnects leaves its barrier", "[server]") {
  TestServer ts(server_options(2));
  auto a = ts.connect(0);
  {
    RawPeer b(ts.port());
    b.authenticate(1, 2, ts.options().secret);
    b.send(wire::encode_frame(wire::Op::kBarrier, wire::Status::kOk, 1,
                              wire::encode(wire::WaitRequest{"b", 10000})));
    REQUIRE(ts.wait_stats([](const Server::Stats& s) { return s.waits == 1; }));
  }  // rank 1's connection drops here
  REQUIRE(ts.wait_stats([](const Server::Stats& s) { return s.waits == 0 && s.barriers == 0; }));
  // Rank 1's entry is gone: rank 0 alone cannot pass, and is told rank 1 is missing.
  CHECK_THROWS_WITH(a->barrier("b", 300ms), Catch::Contains("waiting for rank 1 of 2"));
}

TEST_CASE("ranks seen and connected are tracked", "[server]") {
  TestServer ts(server_options(3));
  auto a = ts.connect(0);
  auto c = ts.connect(2);
  REQUIRE(ts.wait_events([](const Recorded& r) { return r.connected.size() == 2; }));
  CHECK(ts.on_io([&] { return ts.server().ranks_connected(); }) == std::set<int>{0, 2});
  a->goodbye();
  REQUIRE(ts.wait_events([](const Recorded& r) { return r.disconnected.size() == 1; }));
  CHECK(ts.on_io([&] { return ts.server().ranks_connected(); }) == std::set<int>{2});
  CHECK(ts.on_io([&] { return ts.server().ranks_seen(); }) == std::set<int>{0, 2});
  auto rec = ts.recorded();
  CHECK(rec.connected[0].first == 0);
  CHECK_THAT(rec.connected[0].second, Catch::StartsWith("127.0.0.1:"));
}
