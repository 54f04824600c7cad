// cli/elastic/blacklist.h: Horovod's blacklist with cooldown (horovod/runner/elastic/
// discovery.py, HostState), with an injected clock and random source.
#include <catch2/catch.hpp>

#include "cli/elastic/blacklist.h"

using namespace hora::cli;
using std::chrono::seconds;
using Clock = Blacklist::Clock;

namespace {

const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);

}  // namespace

TEST_CASE("without a cooldown range a blacklisted host never comes back") {
  Blacklist b(std::nullopt, [] { return 0.5; });
  CHECK_FALSE(b.is_blacklisted("a", t0));
  CHECK_FALSE(b.blacklist("a", t0).has_value());
  CHECK(b.is_blacklisted("a", t0));
  CHECK(b.is_blacklisted("a", t0 + std::chrono::hours(24 * 365)));
  CHECK_FALSE(b.is_blacklisted("b", t0));
  CHECK(b.blacklisted(t0 + seconds(10)) == std::vector<std::string>{"a"});
  CHECK(b.take_cooled_down(t0 + std::chrono::hours(1000)).empty());
  CHECK_FALSE(b.next_cooldown_end(t0).has_value());
  CHECK(b.failures("a") == 1);
  CHECK(b.failures("b") == 0);
}

TEST_CASE("the cooldown is MIN * 2^n + U * MIN, clamped to [MIN, MAX]") {
  double u = 0.5;
  Blacklist b(std::make_pair(seconds(10), seconds(100)), [&] { return u; });
  // First failure: 10 * 2 + 0.5 * 10 = 25 s.
  auto end = b.blacklist("a", t0);
  REQUIRE(end);
  CHECK(*end == t0 + seconds(25));
  CHECK(b.failures("a") == 1);
  CHECK(b.is_blacklisted("a", t0 + seconds(24)));
  CHECK(b.next_cooldown_end(t0) == t0 + seconds(25));
  CHECK(b.take_cooled_down(t0 + seconds(24)).empty());
  // Over at its end: no longer blacklisted, and taken once.
  CHECK_FALSE(b.is_blacklisted("a", t0 + seconds(25)));
  CHECK(b.blacklisted(t0 + seconds(25)).empty());
  CHECK(b.take_cooled_down(t0 + seconds(25)) == std::vector<std::string>{"a"});
  CHECK(b.take_cooled_down(t0 + seconds(26)).empty());
  CHECK_FALSE(b.is_blacklisted("a", t0 + seconds(26)));

  // Second failure: 10 * 4 + 0 = 40 s (the count is kept across the whitelisting).
  u = 0.0;
  const auto t1 = t0 + seconds(100);
  CHECK(b.blacklist("a", t1) == t1 + seconds(40));
  CHECK(b.failures("a") == 2);
  // Third: 10 * 8 + 0.9 * 10 = 89 s.
  u = 0.9;
  const auto t2 = t1 + seconds(40);
  CHECK(b.take_cooled_down(t2) == std::vector<std::string>{"a"});
  auto third = b.blacklist("a", t2);
  REQUIRE(third);
  CHECK(std::chrono::duration_cast<std::chrono::milliseconds>(*third - t2).count() == 89000);
  // Fourth: 10 * 16 = 160, clamped to MAX 100.
  const auto t3 = t2 + seconds(89);
  CHECK(b.blacklist("a", t3) == t3 + seconds(100));
  CHECK(b.failures("a") == 4);
}

TEST_CASE("blacklisting a host during its cooldown changes nothing") {
  Blacklist b(std::make_pair(seconds(1), seconds(3600)), [] { return 0.0; });
  CHECK(b.blacklist("a", t0) == t0 + seconds(2));
  CHECK(b.blacklist("a", t0 + seconds(1)) == t0 + seconds(2));
  CHECK(b.failures("a") == 1);
  // After the end (even before take_cooled_down) a new failure starts a new, longer cooldown.
  CHECK(b.blacklist("a", t0 + seconds(2)) == t0 + seconds(2) + seconds(4));
  CHECK(b.failures("a") == 2);
}

TEST_CASE("the shortest cooldown is MIN, the count's growth cannot overflow") {
  Blacklist b(std::make_pair(seconds(5), seconds(5)), [] { return 0.99; });
  auto now = t0;
  for (int i = 0; i < 200; ++i) {
    const auto end = b.blacklist("a", now);
    REQUIRE(end);
    CHECK(*end == now + seconds(5));
    now = *end;
  }
  CHECK(b.failures("a") == 200);
}

TEST_CASE("several hosts: sorted lists and the next end") {
  Blacklist b(std::make_pair(seconds(10), seconds(1000)), [] { return 0.0; });
  b.blacklist("c", t0);               // ends t0 + 20
  b.blacklist("a", t0 + seconds(5));  // ends t0 + 25
  CHECK(b.blacklisted(t0 + seconds(6)) == std::vector<std::string>{"a", "c"});
  CHECK(b.next_cooldown_end(t0 + seconds(6)) == t0 + seconds(20));
  CHECK(b.next_cooldown_end(t0 + seconds(20)) == t0 + seconds(25));
  CHECK(b.blacklisted(t0 + seconds(21)) == std::vector<std::string>{"a"});
  CHECK(b.take_cooled_down(t0 + seconds(30)) == std::vector<std::string>{"a", "c"});
  CHECK_FALSE(b.next_cooldown_end(t0 + seconds(30)).has_value());
}

TEST_CASE("the default random source stays within the rule") {
  Blacklist b(std::make_pair(seconds(10), seconds(3600)));
  const auto end = b.blacklist("a", t0);
  REQUIRE(end);
  CHECK(*end >= t0 + seconds(20));
  CHECK(*end <= t0 + seconds(30));
}
