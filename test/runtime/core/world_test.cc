// world_from_environment(): the launcher's contract (docs/environment.md) read into WorldInfo,
// with errors that name the variable, its value and what was expected.
#include <map>
#include <string>

#include <hora/error.h>
#include <catch2/catch.hpp>

#include "runtime/core/world.h"

using hora::detail::world_from_environment;
using Env = std::map<std::string, std::string>;

namespace {

hora::detail::WorldInfo read(const Env& env) {
  return world_from_environment([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

Env launched() {
  return {
      {"HORA_RANK", "5"},
      {"HORA_SIZE", "8"},
      {"HORA_LOCAL_RANK", "1"},
      {"HORA_LOCAL_SIZE", "4"},
      {"HORA_CROSS_RANK", "1"},
      {"HORA_CROSS_SIZE", "2"},
      {"HORA_HOST_INDEX", "1"},
      {"HORA_HOSTNAME", "server2"},
      {"HORA_RENDEZVOUS", "10.0.0.1:40123"},
      {"HORA_IFACE", "eth0"},
      {"HORA_SECRET", std::string(62, 'a') + "0F"},
      {"HORA_START_TIMEOUT", "45"},
  };
}

// The UsageError message for env, or "" when it parses.
std::string error_for(const Env& env) {
  try {
    read(env);
  } catch (const hora::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("without HORA_RANK the process is a world of one", "[world]") {
  const auto world = read({});
  CHECK(world.rank == 0);
  CHECK(world.size == 1);
  CHECK(world.local_size == 1);
  CHECK(world.cross_size == 1);
  CHECK_FALSE(world.launched());
  CHECK_FALSE(world.hostname.empty());  // gethostname()
  CHECK(world.timeout == std::chrono::seconds(30));
}

TEST_CASE("a world of one still honours the tuning variables", "[world]") {
  const auto world = read({{"HORA_TIMEOUT_SECONDS", "2.5"}, {"HORA_HOSTNAME", "laptop"}});
  CHECK(world.timeout == std::chrono::milliseconds(2500));
  CHECK(world.hostname == "laptop");
}

TEST_CASE("a launched rank reads every HORA_ variable", "[world]") {
  const auto world = read(launched());
  CHECK(world.launched());
  CHECK(world.rank == 5);
  CHECK(world.size == 8);
  CHECK(world.local_rank == 1);
  CHECK(world.local_size == 4);
  CHECK(world.cross_rank == 1);
  CHECK(world.cross_size == 2);
  CHECK(world.host_index == 1);
  CHECK(world.hostname == "server2");
  CHECK(world.rendezvous_host == "10.0.0.1");
  CHECK(world.rendezvous_port == 40123);
  CHECK(world.iface == "eth0");
  CHECK(world.secret[0] == 0xaa);
  CHECK(world.secret[31] == 0x0f);
  CHECK(world.start_timeout == std::chrono::seconds(45));
  CHECK(world.timeout == std::chrono::seconds(30));
}

TEST_CASE("HORA_RENDEZVOUS accepts a bracketed IPv6 address", "[world]") {
  auto env = launched();
  env["HORA_RENDEZVOUS"] = "[fd00::1]:5000";
  const auto world = read(env);
  CHECK(world.rendezvous_host == "fd00::1");
  CHECK(world.rendezvous_port == 5000);
}

TEST_CASE("malformed values name the variable, the value and what was expected", "[world]") {
  struct Case {
    const char* variable;
    const char* value;
    const char* expected_fragment;
  };
  const Case cases[] = {
      {"HORA_SIZE", "abc", "the number of ranks"},
      {"HORA_SIZE", "0", "the number of ranks"},
      {"HORA_RANK", "8", "0..7"},
      {"HORA_RANK", "-1", "0..7"},
      {"HORA_RANK", "3x", "0..7"},
      {"HORA_LOCAL_RANK", "4", "0..3"},
      {"HORA_LOCAL_SIZE", "9", "1..8"},
      {"HORA_CROSS_RANK", "2", "0..1"},
      {"HORA_HOST_INDEX", "", "host list"},
      {"HORA_RENDEZVOUS", "10.0.0.1", "host:port"},
      {"HORA_RENDEZVOUS", "10.0.0.1:0", "host:port"},
      {"HORA_RENDEZVOUS", "10.0.0.1:70000", "host:port"},
      {"HORA_RENDEZVOUS", ":40123", "host:port"},
      {"HORA_RENDEZVOUS", "fd00::1:40123", "host:port"},
      {"HORA_TIMEOUT_SECONDS", "0", "positive number of seconds"},
      {"HORA_TIMEOUT_SECONDS", "soon", "positive number of seconds"},
      {"HORA_START_TIMEOUT", "-5", "positive number of seconds"},
  };
  for (const auto& c : cases) {
    auto env = launched();
    env[c.variable] = c.value;
    const std::string message = error_for(env);
    INFO(c.variable << "=" << c.value << " -> " << message);
    CHECK_THAT(message, Catch::Contains(c.variable));
    CHECK_THAT(message, Catch::Contains(std::string("'") + c.value + "'"));
    CHECK_THAT(message, Catch::Contains(c.expected_fragment));
  }
}

TEST_CASE("a missing variable of a launched rank is named", "[world]") {
  for (const char* variable :
       {"HORA_SIZE", "HORA_LOCAL_RANK", "HORA_LOCAL_SIZE", "HORA_CROSS_RANK", "HORA_CROSS_SIZE",
        "HORA_HOST_INDEX", "HORA_RENDEZVOUS", "HORA_SECRET"}) {
    auto env = launched();
    env.erase(variable);
    const std::string message = error_for(env);
    INFO(variable << " -> " << message);
    CHECK_THAT(message, Catch::Contains(variable) && Catch::Contains("missing"));
  }
}

TEST_CASE("a bad secret is reported without echoing it", "[world]") {
  auto env = launched();
  env["HORA_SECRET"] = "deadbeef";
  std::string message = error_for(env);
  CHECK_THAT(message, Catch::Contains("HORA_SECRET") && Catch::Contains("64 hex digits"));
  CHECK_THAT(message, !Catch::Contains("deadbeef"));

  env["HORA_SECRET"] = std::string(63, '0') + "g";
  message = error_for(env);
  CHECK_THAT(message, Catch::Contains("HORA_SECRET") && Catch::Contains("not a hex digit"));
  CHECK_THAT(message, !Catch::Contains(std::string(63, '0') + "g"));
}
