// --network-interfaces parsing: global names, per-host entries, mixing, and the usage errors.
#include <catch2/catch.hpp>

#include "cli/base/errors.h"
#include "cli/network/spec.h"

using Catch::Matchers::Contains;
using hora::cli::NetworkSpec;
using hora::cli::parse_network_spec;
using hora::cli::UsageError;

TEST_CASE("global names apply to every host") {
  const NetworkSpec s = parse_network_spec({"eth0", "eth1"});
  CHECK(s.global == std::vector<std::string>{"eth0", "eth1"});
  CHECK(s.per_host.empty());
  CHECK(s.names_for("anyhost") == std::vector<std::string>{"eth0", "eth1"});
  CHECK_FALSE(s.empty());
}

TEST_CASE("items that still hold commas are split, duplicates dropped") {
  const NetworkSpec s = parse_network_spec({"eth0, eth1", "eth0"});
  CHECK(s.global == std::vector<std::string>{"eth0", "eth1"});
}

TEST_CASE("per-host entries, and unqualified names for the other hosts") {
  const NetworkSpec s = parse_network_spec({"server1=eth0", "server2=ens5", "ib0"});
  CHECK(s.names_for("server1") == std::vector<std::string>{"eth0"});
  CHECK(s.names_for("server2") == std::vector<std::string>{"ens5"});
  CHECK(s.names_for("server3") == std::vector<std::string>{"ib0"});
  CHECK(hora::cli::format_network_spec(s) == "ib0,server1=eth0,server2=ens5");
}

TEST_CASE("a host may be given several names") {
  const NetworkSpec s = parse_network_spec({"h1=eth0,h1=eth1"});
  CHECK(s.names_for("h1") == std::vector<std::string>{"eth0", "eth1"});
  CHECK(s.global.empty());
}

TEST_CASE("no items: empty spec (discovery)") { CHECK(parse_network_spec({}).empty()); }

TEST_CASE("bad items are usage errors that say what to write") {
  CHECK_THROWS_WITH(parse_network_spec({"=eth0"}),
                    Contains("no host before '='") && Contains("HOST=INTERFACE"));
  CHECK_THROWS_WITH(parse_network_spec({"h1="}),
                    Contains("no interface after '='") && Contains("h1=eth0"));
  CHECK_THROWS_WITH(parse_network_spec({"h1=eth0=x"}), Contains("more than one '='"));
  CHECK_THROWS_WITH(parse_network_spec({"eth0,,eth1"}),
                    Contains("empty item") && Contains("--network-interfaces eth0,eth1"));
  CHECK_THROWS_WITH(parse_network_spec({"averyveryverylongname0"}),
                    Contains("at most 15 characters"));
  CHECK_THROWS_WITH(parse_network_spec({"eth0/1"}), Contains("contains '/'"));
  CHECK_THROWS_WITH(parse_network_spec({"h1=eth 0"}), Contains("contains ' '"));
  CHECK_THROWS_WITH(parse_network_spec({"eth0:1"}), Contains("contains ':'"));
  CHECK_THROWS_AS(parse_network_spec({".."}), UsageError);
}
