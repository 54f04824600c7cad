#include <unistd.h>

#include <catch2/catch.hpp>

#include "cli/hosts/local_host.h"

using hora::cli::LocalHost;

TEST_CASE("loopback names and addresses are local") {
  LocalHost h({}, {});
  for (const char* n : {"localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "::1", "[::1]",
                        "0:0:0:0:0:0:0:1", "ip6-localhost"}) {
    INFO(n);
    if (std::string(n) == "[::1]") {
      CHECK_FALSE(h.is_local(n));  // brackets belong to -H syntax, HostSpec::name has none
    } else {
      CHECK(h.is_local(n));
    }
  }
  CHECK_FALSE(h.is_local("server1"));
  CHECK_FALSE(h.is_local("10.0.0.1"));
  CHECK_FALSE(h.is_local("128.0.0.1"));
}

TEST_CASE("this machine's names and interface addresses are local") {
  LocalHost h({"Node7.cluster", "node7"}, {"10.1.2.3", "fd00:0::5"});
  CHECK(h.is_local("node7"));
  CHECK(h.is_local("NODE7.cluster"));
  CHECK(h.is_local("10.1.2.3"));
  CHECK(h.is_local("fd00::5"));
  CHECK_FALSE(h.is_local("node8"));
  CHECK_FALSE(h.is_local("10.1.2.4"));
}

TEST_CASE("discover() finds loopback and this host's name") {
  LocalHost h = LocalHost::discover();
  CHECK(h.is_local("localhost"));
  char name[256] = {};
  REQUIRE(gethostname(name, sizeof name - 1) == 0);
  CHECK(h.is_local(name));
}
