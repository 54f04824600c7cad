#include <catch2/catch.hpp>

#include "common/endpoint.h"

TEST_CASE("endpoint_host drops the port and IPv6 brackets") {
  CHECK(hora::endpoint_host("127.0.0.1:40312") == "127.0.0.1");
  CHECK(hora::endpoint_host("[::1]:40312") == "::1");
  CHECK(hora::endpoint_host("[fe80::1%eth0]:22") == "fe80::1%eth0");
  CHECK(hora::endpoint_host("h1") == "h1");
  CHECK(hora::endpoint_host("") == "");
}
