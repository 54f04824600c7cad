// LogThrottle (common/log_throttle.h) with a made-up clock.
#include "common/log_throttle.h"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using hora::LogThrottle;

namespace {

LogThrottle::Summary rejected(const std::string& ip) {
  return [ip](std::uint64_t n) {
    return "rejected " + std::to_string(n) + " connections from " + ip +
           " in the last 1 s: bad frame";
  };
}

}  // namespace

TEST_CASE("a flood costs one full line, then one summary per second", "[log_throttle]") {
  LogThrottle t;
  const LogThrottle::Clock::time_point t0{};
  CHECK(t.admit("bad frame 127.0.0.1", t0, rejected("127.0.0.1")));
  int full = 1;
  for (int i = 1; i < 812; ++i) {
    if (t.admit("bad frame 127.0.0.1", t0 + i * 1ms, rejected("127.0.0.1"))) ++full;
  }
  CHECK(full == 1);
  CHECK(t.next_flush() == t0 + 1s);
  CHECK(t.flush(t0 + 999ms).empty());
  auto lines = t.flush(t0 + 1s);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "rejected 812 connections from 127.0.0.1 in the last 1 s: bad frame");
  // The flood goes on: still counted, summarised a second later.
  CHECK_FALSE(t.admit("bad frame 127.0.0.1", t0 + 1500ms, rejected("127.0.0.1")));
  CHECK_FALSE(t.admit("bad frame 127.0.0.1", t0 + 1600ms, rejected("127.0.0.1")));
  lines = t.flush(t0 + 2s);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "rejected 2 connections from 127.0.0.1 in the last 1 s: bad frame");
  // A quiet window ends the watch: the next one is logged in full again.
  CHECK(t.flush(t0 + 3s).empty());
  CHECK_FALSE(t.next_flush());
  CHECK(t.admit("bad frame 127.0.0.1", t0 + 4s, rejected("127.0.0.1")));
}

TEST_CASE("kinds are limited separately", "[log_throttle]") {
  LogThrottle t;
  const LogThrottle::Clock::time_point t0{};
  CHECK(t.admit("a", t0, rejected("10.0.0.1")));
  CHECK(t.admit("b", t0, rejected("10.0.0.2")));
  CHECK_FALSE(t.admit("a", t0, rejected("10.0.0.1")));
  auto lines = t.flush(t0 + 1s);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "rejected 2 connections from 10.0.0.1 in the last 1 s: bad frame");
}
