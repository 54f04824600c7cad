// Unit tests of the engine's single-rank parts: the negotiation wire format, the response cache,
// the message table's validation, the stall warning's wording, options from the environment,
// the timeline writer, and the in-process test transport itself.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include <hora/error.h>

#include "runtime/engine/engine_options.h"
#include "runtime/engine/message_table.h"
#include "runtime/engine/negotiation_message.h"
#include "runtime/engine/op_state.h"
#include "runtime/engine/response_cache.h"
#include "runtime/engine/stall_inspector.h"
#include "runtime/engine/timeline.h"
#include "test/read_file.h"
#include "test/runtime/engine/json_reader.h"
#include "test/runtime/engine/thread_transport.h"

using namespace hora;
using namespace hora::detail::engine;

using hora::test::slurp;

namespace {

Request allreduce(const std::string& name, std::uint64_t count, DataType t = DataType::kFloat32,
                  ReduceOp op = ReduceOp::kSum) {
  Request r;
  r.name = name;
  r.type = OpType::kAllreduce;
  r.dtype = t;
  r.op = op;
  r.count = count;
  return r;
}

Response agreed(const Request& r) {
  Response resp;
  resp.request = r;
  return resp;
}

std::string temp_path(const std::string& stem) {
  return "/tmp/hora_engine_units_" + std::to_string(::getpid()) + "_" + stem;
}

}  // namespace

TEST_CASE("NegotiationMessage round-trips requests and abandon proposals", "[negotiation]") {
  NegotiationMessage m;
  Request b;
  b.name = "emb/weights \xce\xbb";
  b.type = OpType::kBroadcast;
  b.dtype = DataType::kBFloat16;
  b.count = (1ull << 40) + 3;
  b.root = 7;
  m.requests.push_back({allreduce("grad/fc1", 1024, DataType::kFloat64, ReduceOp::kAverage), 17});
  m.requests.push_back({b, 0xffffffffu});
  m.abandon = {"lost", ""};
  NegotiationMessage back = NegotiationMessage::decode(m.encode(), 3);
  REQUIRE(back.requests.size() == 2);
  CHECK(back.requests[0].request == m.requests[0].request);
  CHECK(back.requests[0].waited_ms == 17);
  CHECK(back.requests[1].request == b);
  CHECK(back.requests[1].waited_ms == 0xffffffffu);
  CHECK(back.abandon == m.abandon);
  CHECK(NegotiationMessage::decode(NegotiationMessage{}.encode(), 0).empty());
}

TEST_CASE("NegotiationMessage rejects malformed bytes naming the sender", "[negotiation]") {
  NegotiationMessage m;
  m.requests.push_back({allreduce("x", 4), 1});
  std::vector<std::uint8_t> bytes = m.encode();

  auto truncated = bytes;
  truncated.pop_back();
  CHECK_THROWS_WITH(NegotiationMessage::decode(truncated, 5),
                    Catch::Contains("from rank 5") && Catch::Contains("truncated"));
  auto trailing = bytes;
  trailing.push_back(0);
  CHECK_THROWS_WITH(NegotiationMessage::decode(trailing, 1), Catch::Contains("trailing bytes"));
  auto version = bytes;
  version[2] = 9;
  CHECK_THROWS_WITH(NegotiationMessage::decode(version, 2), Catch::Contains("version 9"));
  auto type = bytes;
  type[3 + 4 + 2 + 1] = 42;  // header, count, name length, name "x", then the op type
  CHECK_THROWS_WITH(NegotiationMessage::decode(type, 2), Catch::Contains("unknown op type 42"));
  CHECK_THROWS_AS(NegotiationMessage::decode(std::vector<std::uint8_t>{}, 0), hora::Error);
}

TEST_CASE("ResponseCache: hits, invalid signatures, LRU eviction and bit reuse", "[cache]") {
  ResponseCache cache(2);
  CHECK(cache.lookup(allreduce("a", 8), 0).state == ResponseCache::State::kMiss);
  CHECK_FALSE(cache.put(agreed(allreduce("a", 8))).has_value());
  CHECK_FALSE(cache.put(agreed(allreduce("b", 8))).has_value());
  auto a = cache.lookup(allreduce("a", 8), 0);
  auto b = cache.lookup(allreduce("b", 8), 1);
  CHECK(a.state == ResponseCache::State::kHit);
  CHECK(b.state == ResponseCache::State::kHit);
  CHECK(a.bit == 0);
  CHECK(b.bit == 1);
  // Same name, another count or op or dtype: the entry is stale everywhere.
  CHECK(cache.lookup(allreduce("a", 9), 0).state == ResponseCache::State::kInvalid);
  CHECK(cache.lookup(allreduce("a", 8, DataType::kInt32), 0).state ==
        ResponseCache::State::kInvalid);
  CHECK(cache.lookup(allreduce("a", 8, DataType::kFloat32, ReduceOp::kMax), 0).state ==
        ResponseCache::State::kInvalid);

  // "a" is refreshed, so "b" is the least recently used and makes room for "c".
  CHECK_FALSE(cache.put(agreed(allreduce("a", 8))).has_value());
  auto evicted = cache.put(agreed(allreduce("c", 8)));
  REQUIRE(evicted.has_value());
  CHECK(*evicted == 1);
  CHECK(cache.lookup(allreduce("b", 8), 0).state == ResponseCache::State::kMiss);
  CHECK(cache.lookup(allreduce("c", 8), 0).bit == 1);
  CHECK(cache.at(1).request.name == "c");

  CHECK(cache.bit_limit() == 2);
  cache.erase(0);
  CHECK_FALSE(cache.contains(0));
  CHECK(cache.size() == 1);
  CHECK(cache.bit_limit() == 2);
  cache.erase(1);
  CHECK(cache.bit_limit() == 0);
  CHECK_FALSE(cache.put(agreed(allreduce("c", 8))).has_value());
  CHECK_FALSE(cache.put(agreed(allreduce("d", 8))).has_value());
  CHECK(cache.lookup(allreduce("c", 8), 0).bit == 0);  // lowest free bit is reused
  CHECK(cache.lookup(allreduce("d", 8), 0).bit == 1);
  CHECK(cache.bit_limit() == 2);

  ResponseCache off(0);
  CHECK_FALSE(off.put(agreed(allreduce("a", 8))).has_value());
  CHECK(off.lookup(allreduce("a", 8), 0).state == ResponseCache::State::kMiss);
}

TEST_CASE("ResponseCache: an allgather hit compares this rank's own count", "[cache]") {
  Request g;
  g.name = "gather";
  g.type = OpType::kAllgather;
  g.count = 3;
  Response resp = agreed(g);
  resp.rank_counts = {3, 5, 7};
  ResponseCache cache(4);
  cache.put(resp);
  Request mine = g;
  mine.count = 5;
  CHECK(cache.lookup(mine, 1).state == ResponseCache::State::kHit);
  CHECK(cache.lookup(mine, 2).state == ResponseCache::State::kInvalid);
}

TEST_CASE("MessageTable agrees when every rank submitted and names mismatches", "[table]") {
  using Clock = MessageTable::Clock;
  const auto t = Clock::now();
  MessageTable table(3);
  CHECK_FALSE(table.add(0, allreduce("x", 1024), t));
  CHECK_FALSE(table.add(2, allreduce("x", 512), t));
  CHECK(table.add(1, allreduce("x", 1024), t));
  Response r = table.take("x");
  CHECK_FALSE(r.ok());
  CHECK(r.error_kind == Response::ErrorKind::kMismatch);
  CHECK(r.error ==
        "Mismatched allreduce tensor shapes for tensor 'x': rank 0 sent 1024 elements but rank 2 "
        "sent 512");
  CHECK(table.size() == 0);

  table.add(0, allreduce("d", 4, DataType::kFloat32), t);
  table.add(1, allreduce("d", 4, DataType::kInt32), t);
  table.add(2, allreduce("d", 4, DataType::kFloat32), t);
  CHECK(
      table.take("d").error ==
      "Mismatched allreduce data types for tensor 'd': rank 0 sent float32 but rank 1 sent int32");

  table.add(0, allreduce("o", 4), t);
  table.add(1, allreduce("o", 4), t);
  table.add(2, allreduce("o", 4, DataType::kFloat32, ReduceOp::kMax), t);
  CHECK(table.take("o").error ==
        "Mismatched allreduce reduce operations for tensor 'o': rank 0 asked for sum but rank 2 "
        "asked for max");

  Request b0 = allreduce("b", 4);
  b0.type = OpType::kBroadcast;
  Request b1 = b0;
  b1.root = 2;
  table.add(0, b0, t);
  table.add(1, b1, t);
  table.add(2, b0, t);
  CHECK(
      table.take("b").error ==
      "Mismatched broadcast root ranks for tensor 'b': rank 0 sent root 0 but rank 1 sent root 2");

  table.add(0, allreduce("k", 4), t);
  Request k1 = b0;
  k1.name = "k";
  table.add(1, k1, t);
  table.add(2, allreduce("k", 4), t);
  CHECK(table.take("k").error ==
        "Mismatched collective operations for tensor 'k': rank 0 submitted allreduce but rank 1 "
        "submitted broadcast");

  Request g = allreduce("g", 1);
  g.type = OpType::kAllgather;
  for (int rank = 0; rank < 3; ++rank) {
    g.count = static_cast<std::uint64_t>(10 + rank);
    table.add(rank, g, t);
  }
  Response gathered = table.take("g");
  CHECK(gathered.ok());
  CHECK(gathered.rank_counts == std::vector<std::uint64_t>{10, 11, 12});

  CHECK_THROWS_AS(table.take("nothing"), hora::Error);
  table.add(1, allreduce("dup", 4), t);
  CHECK_THROWS_WITH(table.add(1, allreduce("dup", 4), t), Catch::Contains("twice"));
}

TEST_CASE("MessageTable reports pending names with submitted and missing ranks", "[table]") {
  using Clock = MessageTable::Clock;
  const auto old = Clock::now() - std::chrono::seconds(10);
  const auto now = Clock::now();
  MessageTable table(4);
  table.add(0, allreduce("late", 4), now);
  table.add(2, allreduce("stuck", 4), now);
  table.add(0, allreduce("stuck", 4), old);  // an earlier submission dates the entry
  auto pending = table.pending_since(now - std::chrono::seconds(5));
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].name == "stuck");
  CHECK(pending[0].submitted == std::vector<int>{0, 2});
  CHECK(pending[0].missing == std::vector<int>{1, 3});
  auto erased = table.erase("stuck");
  REQUIRE(erased.has_value());
  CHECK(erased->missing == std::vector<int>{1, 3});
  CHECK_FALSE(table.erase("stuck").has_value());
  CHECK(table.contains("late"));
}

TEST_CASE("MessageTable: a joined rank is not waited for, and the join names the last",
          "[table][join]") {
  const auto t = MessageTable::Clock::now();
  Request join;
  join.name = kJoinName;
  join.type = OpType::kJoin;
  join.dtype = DataType::kUInt8;
  MessageTable table(3);
  // Rank 1 joins first; rank 0 already waits for "x" (which waited for rank 1 only).
  CHECK_FALSE(table.add(0, allreduce("x", 4), t));
  CHECK_FALSE(table.add(2, allreduce("y", 4), t));
  CHECK_FALSE(table.add(1, join, t));
  CHECK(table.any_joined());
  CHECK(table.joined(1));
  CHECK_FALSE(table.joined(0));
  CHECK(table.ready_names().empty());  // "x" still waits for rank 2, "y" for rank 0
  CHECK(table.add(2, allreduce("x", 4), t));
  CHECK(table.ready_names() == std::vector<std::string>{"x"});
  Response x = table.take("x");
  CHECK(x.ok());
  CHECK(x.request.count == 4);
  // The stall check does not call a joined rank missing.
  auto pending = table.pending_since(t);
  REQUIRE(pending.size() == 2);  // the join and "y"
  CHECK(pending[1].name == "y");
  CHECK(pending[1].missing == std::vector<int>{0});
  // Only allreduce runs beside a join (Horovod's rule), and any other op is refused as soon as
  // one rank submits it, without waiting for the others that have not joined.
  Request g = allreduce("g", 2);
  g.type = OpType::kAllgather;
  CHECK(table.add(0, g, t));
  CHECK(table.ready_names() == std::vector<std::string>{"g"});
  Response refused = table.take("g");
  CHECK(refused.error_kind == Response::ErrorKind::kMismatch);
  CHECK(refused.error ==
        "allgather 'g' is not supported while a rank has joined (hora.join()): only allreduce "
        "runs alongside a join, with zeros from the joined ranks");
  // Rank 2 joins: "y", which waited only for rank 0, is not ready; then rank 0 joins last, which
  // readies both "y" and the join.
  CHECK_FALSE(table.add(2, join, t));
  CHECK(table.ready_names().empty());
  CHECK(table.add(0, join, t));
  CHECK(table.ready_names() == std::vector<std::string>{kJoinName, "y"});
  CHECK(table.take("y").ok());
  Response joined = table.take(kJoinName);
  CHECK(joined.ok());
  CHECK(joined.request.type == OpType::kJoin);
  CHECK(joined.request.root == 0);  // the last rank to join
  // Taking the join ends it: entries wait for every rank again.
  CHECK_FALSE(table.any_joined());
  CHECK_FALSE(table.add(0, allreduce("z", 4), t));
  CHECK_FALSE(table.add(1, allreduce("z", 4), t));
  CHECK(table.ready_names().empty());
  CHECK(table.size() == 1);
}

TEST_CASE("StallInspector formats rank lists and the warning block", "[stall]") {
  CHECK(StallInspector::format_ranks({0, 2, 3, 4, 5, 7}) == "0, 2-5, 7");
  CHECK(StallInspector::format_ranks({1, 2}) == "1, 2");
  CHECK(StallInspector::format_ranks({3}) == "3");
  CHECK(StallInspector::format_ranks({}).empty());

  EngineOptions o;
  o.stall_warning_time = std::chrono::milliseconds(100);
  std::vector<std::string> logged;
  StallInspector inspector(o, 0, [&](const std::string& block) { logged.push_back(block); });
  MessageTable table(4);
  const auto start = MessageTable::Clock::now();
  table.add(0, allreduce("grad/w1", 4), start);
  table.add(2, allreduce("grad/w1", 4), start);
  CHECK(inspector.check(table, start).empty());
  CHECK(logged.empty());  // not stalled yet
  inspector.check(table, start + std::chrono::seconds(1));
  REQUIRE(logged.size() == 1);
  CHECK_THAT(logged[0], Catch::Contains("allreduce 'grad/w1': missing on ranks 1, 3; submitted by "
                                        "ranks 0, 2"));
  CHECK_THAT(logged[0], Catch::Contains("HORA_STALL_CHECK_SECONDS"));
  // Durations in hora::format_duration's spelling.
  CHECK_THAT(logged[0],
             Catch::Contains("for more than 100 ms:") && Catch::Contains("(waiting 1 s)"));

  StallInspector quiet(o, 1, [&](const std::string& block) { logged.push_back(block); });
  quiet.check(table, start + std::chrono::seconds(1));
  CHECK(logged.size() == 1);  // only rank 0 logs
}

TEST_CASE("StallInspector proposes stalled names for shutdown once", "[stall]") {
  EngineOptions o;
  o.stall_warning_time = std::chrono::milliseconds(100);
  o.stall_shutdown_time = std::chrono::milliseconds(200);
  StallInspector inspector(o, 3, nullptr);
  MessageTable table(2);
  const auto start = MessageTable::Clock::now();
  table.add(0, allreduce("x", 4), start);
  CHECK(inspector.check(table, start + std::chrono::milliseconds(150)).empty());
  CHECK(inspector.check(table, start + std::chrono::milliseconds(300)) ==
        std::vector<std::string>{"x"});
  CHECK(inspector.check(table, start + std::chrono::milliseconds(400)).empty());
  CHECK(inspector.should_uncache(start, start + std::chrono::milliseconds(100)));
  CHECK_FALSE(inspector.should_uncache(start, start + std::chrono::milliseconds(50)));

  o.stall_check = false;
  StallInspector off(o, 0, nullptr);
  CHECK(off.check(table, start + std::chrono::hours(1)).empty());
  CHECK_FALSE(off.should_uncache(start, start + std::chrono::hours(1)));
}

namespace {

struct ScopedEnv {
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars)
      : vars_(std::move(vars)) {
    for (const auto& [k, v] : vars_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : vars_) ::unsetenv(k.c_str());
  }
  std::vector<std::pair<std::string, std::string>> vars_;
};

}  // namespace

TEST_CASE("EngineOptions::from_environment reads every variable with defaults", "[options]") {
  {
    EngineOptions o = EngineOptions::from_environment();
    CHECK(o.cycle_time == std::chrono::milliseconds(5));
    CHECK(o.cache_capacity == 1024);
    CHECK(o.fusion_threshold == 128u * 1024 * 1024);
    CHECK(o.stall_check);
    CHECK(o.stall_warning_time == std::chrono::seconds(60));
    CHECK(o.stall_shutdown_time == std::chrono::seconds(0));
    CHECK(o.timeline_path.empty());
    CHECK_FALSE(o.timeline_mark_cycles);
  }
  {
    ScopedEnv env({{"HORA_CYCLE_TIME_MS", "2.5"},
                   {"HORA_CACHE_CAPACITY", "0"},
                   {"HORA_FUSION_THRESHOLD", "0"},
                   {"HORA_STALL_CHECK_SECONDS", "0.5"},
                   {"HORA_STALL_CHECK_DISABLE", "1"},
                   {"HORA_STALL_SHUTDOWN_SECONDS", "3"},
                   {"HORA_TIMELINE", "/tmp/t.json"},
                   {"HORA_TIMELINE_MARK_CYCLES", "1"}});
    EngineOptions o = EngineOptions::from_environment();
    CHECK(o.cycle_time == std::chrono::microseconds(2500));
    CHECK(o.cache_capacity == 0);
    CHECK(o.fusion_threshold == 0);
    CHECK(o.stall_warning_time == std::chrono::milliseconds(500));
    CHECK_FALSE(o.stall_check);
    CHECK(o.stall_shutdown_time == std::chrono::seconds(3));
    CHECK(o.timeline_path == "/tmp/t.json");
    CHECK(o.timeline_mark_cycles);
  }
  for (auto [var, value] :
       std::vector<std::pair<std::string, std::string>>{{"HORA_CYCLE_TIME_MS", "0"},
                                                        {"HORA_CYCLE_TIME_MS", "fast"},
                                                        {"HORA_CACHE_CAPACITY", "-1"},
                                                        {"HORA_FUSION_THRESHOLD", "64MB"},
                                                        {"HORA_STALL_CHECK_SECONDS", "0"},
                                                        {"HORA_STALL_CHECK_DISABLE", "maybe"},
                                                        {"HORA_STALL_SHUTDOWN_SECONDS", "-5"},
                                                        // would overflow the milliseconds
                                                        {"HORA_STALL_CHECK_SECONDS", "1e300"},
                                                        {"HORA_STALL_SHUTDOWN_SECONDS", "1e300"},
                                                        {"HORA_TIMELINE_MARK_CYCLES", "2"}}) {
    ScopedEnv env({{var, value}});
    CHECK_THROWS_AS(EngineOptions::from_environment(), hora::UsageError);
    CHECK_THROWS_WITH(EngineOptions::from_environment(),
                      Catch::Contains(var + "='" + value + "'") && Catch::Contains("expected"));
  }
}

TEST_CASE("Timeline writes a valid Chrome trace with one row per tensor", "[timeline]") {
  const std::string path = temp_path("timeline.json");
  {
    Timeline t;
    t.open(path, true);
    const auto t0 = Timeline::Clock::now();
    t.mark_cycle(t0);
    t.span("grad/\"quoted\"\n", "NEGOTIATE_ALLREDUCE", t0, t0 + std::chrono::microseconds(5));
    t.span("grad/b", "ALLREDUCE", t0, t0 + std::chrono::microseconds(7), "\"bytes\":16");
    t.flush();
    // Before close() the array is still open: not yet valid JSON.
    CHECK_THROWS(hora::test::parse_json(slurp(path)));
  }  // the destructor closes it
  hora::test::JsonValue doc = hora::test::parse_json(slurp(path));
  REQUIRE(doc.kind == hora::test::JsonValue::Kind::kArray);
  int names = 0, spans = 0, cycles = 0;
  for (const auto& e : doc.array) {
    const std::string& ph = e.find("ph")->string;
    if (ph == "M" && e.find("name")->string == "process_name") {
      const std::string& n = e.find("args")->find("name")->string;
      if (n == "grad/\"quoted\"\n" || n == "grad/b") ++names;
    } else if (ph == "X") {
      ++spans;
      CHECK(e.find("dur") != nullptr);
    } else if (ph == "i") {
      ++cycles;
    }
  }
  CHECK(names == 2);
  CHECK(spans == 2);
  CHECK(cycles == 1);
  std::remove(path.c_str());

  Timeline bad;
  CHECK_THROWS_WITH(bad.open("/nonexistent-dir/t.json", false),
                    Catch::Contains("/nonexistent-dir/t.json") && Catch::Contains("HORA_TIMELINE"));
}

TEST_CASE("ThreadTransport implements the transport's semantics", "[transport]") {
  const int n = GENERATE(1, 2, 3);
  hora::test::ThreadWorld world(n, std::chrono::seconds(20));
  std::vector<std::string> failures(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto fail = [&](const std::string& what) {
        failures[static_cast<std::size_t>(r)] += what + "; ";
      };
      try {
        hora::test::ThreadTransport t(world, r);
        std::vector<std::uint64_t> words{~0ull, 0xffull << (8 * r), 1};
        t.allreduce_and(words);
        if (words[0] != ~0ull || words[1] != (n == 1 ? 0xffull : 0) || words[2] != 1) fail("and");
        std::vector<std::uint8_t> mine(static_cast<std::size_t>(r), static_cast<std::uint8_t>(r));
        auto all = t.allgather_bytes(mine);
        for (int q = 0; q < n; ++q) {
          if (all[static_cast<std::size_t>(q)] !=
              std::vector<std::uint8_t>(static_cast<std::size_t>(q),
                                        static_cast<std::uint8_t>(q))) {
            fail("gather bytes");
          }
        }
        std::vector<float> v{1.0f * r, 2.0f, 3.0f};
        t.allreduce(v.data(), v.data(), 3, DataType::kFloat32, ReduceOp::kAverage);
        if (v[0] != (n - 1) / 2.0f || v[1] != 2.0f) fail("allreduce avg");
        std::vector<std::int32_t> x(static_cast<std::size_t>(r + 1), r);
        std::vector<std::size_t> counts;
        for (int q = 0; q < n; ++q) counts.push_back(static_cast<std::size_t>(q + 1));
        std::vector<std::int32_t> gathered(static_cast<std::size_t>(n * (n + 1) / 2));
        t.allgatherv(x.data(), gathered.data(), counts, DataType::kInt32);
        std::size_t k = 0;
        for (int q = 0; q < n; ++q) {
          for (int i = 0; i <= q; ++i) {
            if (gathered[k++] != q) fail("allgatherv");
          }
        }
        std::vector<std::int64_t> b{r == n - 1 ? 42 : 0};
        t.broadcast(b.data(), 1, DataType::kInt64, n - 1);
        if (b[0] != 42) fail("broadcast");
        // alltoall: rank r sends q+1 copies of (100r + q) to rank q.
        std::vector<std::size_t> send_splits, recv_splits;
        std::vector<std::int32_t> send;
        for (int q = 0; q < n; ++q) {
          send_splits.push_back(static_cast<std::size_t>(q + 1));
          recv_splits.push_back(static_cast<std::size_t>(r + 1));
          for (int i = 0; i <= q; ++i) send.push_back(100 * r + q);
        }
        std::vector<std::int32_t> recv(static_cast<std::size_t>(n * (r + 1)));
        t.alltoallv(send.data(), send_splits, recv.data(), recv_splits, DataType::kInt32);
        for (int q = 0; q < n; ++q) {
          for (int i = 0; i <= r; ++i) {
            if (recv[static_cast<std::size_t>(q * (r + 1) + i)] != 100 * q + r) fail("alltoallv");
          }
        }
        // reducescatter of 7 elements: blocks of 7/n (+1 for the first 7%n ranks).
        std::vector<std::int32_t> rs(7);
        for (int i = 0; i < 7; ++i) rs[static_cast<std::size_t>(i)] = i;
        std::size_t block = 7 / n + (static_cast<std::size_t>(r) < 7u % n ? 1 : 0);
        std::size_t start = static_cast<std::size_t>(r) * (7 / n) + std::min<std::size_t>(r, 7 % n);
        std::vector<std::int32_t> out(block);
        t.reducescatter(rs.data(), out.data(), 7, DataType::kInt32, ReduceOp::kSum);
        for (std::size_t i = 0; i < block; ++i) {
          if (out[i] != static_cast<std::int32_t>(start + i) * n) fail("reducescatter");
        }
      } catch (const std::exception& e) {
        fail(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(failures[static_cast<std::size_t>(r)].empty());
  }
}

TEST_CASE("ThreadWorld names the rank that never arrived", "[transport]") {
  hora::test::ThreadWorld world(3, std::chrono::milliseconds(200));
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        world.barrier(r, "test barrier");
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  const bool one_names_rank_2 = errors[0].find("for ranks 2") != std::string::npos ||
                                errors[1].find("for ranks 2") != std::string::npos;
  CHECK(one_names_rank_2);
  CHECK_FALSE(errors[0].empty());
  CHECK_FALSE(errors[1].empty());
}

namespace {

Request shaped(const std::string& name, OpType type, std::vector<std::int64_t> shape) {
  Request r = allreduce(name, 1);
  r.type = type;
  r.shape = std::move(shape);
  r.count = 1;
  for (std::int64_t d : r.shape) r.count *= static_cast<std::uint64_t>(d);
  return r;
}

// Every rank's request for `name` with rank r's shape shapes[r]; returns take()'s error.
std::string shape_error(OpType type, const std::vector<std::vector<std::int64_t>>& shapes) {
  MessageTable table(static_cast<int>(shapes.size()));
  const auto t = MessageTable::Clock::now();
  for (std::size_t r = 0; r < shapes.size(); ++r) {
    table.add(static_cast<int>(r), shaped("s", type, shapes[r]), t);
  }
  return table.take("s").error;
}

}  // namespace

TEST_CASE("MessageTable checks shapes by Horovod's rules", "[table][shape]") {
  // allgather: trailing dimensions and the number of dimensions must agree; the first may differ.
  CHECK(shape_error(OpType::kAllgather, {{2, 3}, {2, 4}}) ==
        "Mismatched allgather tensor shapes for tensor 's': One or more ranks sent tensors with "
        "different dimensions after the first (dimension 1): rank 0 sent [2, 3] but rank 1 sent "
        "[2, 4]");
  CHECK(shape_error(OpType::kAllgather, {{2, 3}, {2, 3}, {6}}) ==
        "Mismatched allgather tensor shapes for tensor 's': One or more ranks sent tensors of "
        "rank 2, but another rank sent a tensor of rank 1: rank 0 sent [2, 3] but rank 2 sent [6]");
  CHECK(shape_error(OpType::kAllgather, {{1, 3}, {5, 3}, {0, 3}}).empty());
  CHECK(shape_error(OpType::kAlltoall, {{4, 2}, {4, 3}}) ==
        "Mismatched alltoall tensor shapes for tensor 's': One or more ranks sent tensors with "
        "different dimensions after the first (dimension 1): rank 0 sent [4, 2] but rank 1 sent "
        "[4, 3]");
  CHECK(shape_error(OpType::kAlltoall, {{4, 2}, {7, 2}}).empty());
  // Every other op: the same shape, even where the counts agree.
  CHECK(shape_error(OpType::kAllreduce, {{2, 3}, {3, 2}}) ==
        "Mismatched allreduce tensor shapes for tensor 's': rank 0 sent [2, 3] but rank 1 sent "
        "[3, 2]");
  CHECK(
      shape_error(OpType::kBroadcast, {{6}, {6}, {2, 3}}) ==
      "Mismatched broadcast tensor shapes for tensor 's': rank 0 sent [6] but rank 2 sent [2, 3]");
  CHECK(shape_error(OpType::kReducescatter, {{4, 2}, {2, 4}}) ==
        "Mismatched reducescatter tensor shapes for tensor 's': rank 0 sent [4, 2] but rank 1 "
        "sent [2, 4]");
  CHECK(shape_error(OpType::kAllreduce, {{2, 3}, {2, 3}}).empty());
  // The flat C++ forms carry no shape: only their counts are compared.
  CHECK(shape_error(OpType::kAllreduce, {{2, 3}, {}}).empty() == false);  // count 6 vs 1
}

TEST_CASE("NegotiationMessage carries a request's shape", "[negotiation][shape]") {
  NegotiationMessage m;
  m.requests.push_back({shaped("a", OpType::kAllgather, {2, 3, 5}), 0});
  m.requests.push_back({shaped("b", OpType::kAllreduce, {}), 0});
  NegotiationMessage back = NegotiationMessage::decode(m.encode(), 1);
  REQUIRE(back.requests.size() == 2);
  CHECK(back.requests[0].request.shape == std::vector<std::int64_t>{2, 3, 5});
  CHECK(back.requests[1].request.shape.empty());
}

TEST_CASE("alltoall splits that overflow 64 bits are a usage error, not a crash", "[alltoall]") {
  const std::size_t big = std::numeric_limits<std::size_t>::max() / 2;
  try {
    make_alltoall_op("o", nullptr, {big, big, 6}, DataType::kFloat32, nullptr, nullptr);
    FAIL("no error");
  } catch (const UsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("hora::alltoall_async('o'): send_splits [" +
                                         std::to_string(big) + ", " + std::to_string(big) +
                                         ", 6] add up to more elements than fit in 64 bits"));
  }
}
