#include "common/duration.h"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;

TEST_CASE("durations below a second read in milliseconds") {
  CHECK(hora::format_duration(0ms) == "0 ms");
  CHECK(hora::format_duration(250ms) == "250 ms");
  CHECK(hora::format_duration(999ms) == "999 ms");
  CHECK(hora::format_duration(-5ms) == "0 ms");
}

TEST_CASE("durations from a second read in seconds with one decimal, none when whole") {
  CHECK(hora::format_duration(1000ms) == "1 s");
  CHECK(hora::format_duration(1001ms) == "1 s");
  CHECK(hora::format_duration(1500ms) == "1.5 s");
  CHECK(hora::format_duration(2449ms) == "2.4 s");
  CHECK(hora::format_duration(30s) == "30 s");
  CHECK(hora::format_duration(std::chrono::minutes(2)) == "120 s");
}

TEST_CASE("other duration types are truncated to milliseconds") {
  CHECK(hora::format_duration(std::chrono::microseconds(1500)) == "1 ms");
  CHECK(hora::format_duration(std::chrono::duration<double>(2.5)) == "2.5 s");
}
